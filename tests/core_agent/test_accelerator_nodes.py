"""Nodes of every accelerator vendor, read through the real client from the emulator, report
their devices, their model and what their pods use."""

from __future__ import annotations

from typing import Any

from core_agent.kubernetes.source import VGPU_REGISTER, KubernetesSource
from tests.factories import eventually
from tests.k8s_emulator.server import NODES as NODE_GVR
from tests.k8s_emulator.server import PODS


def accelerator_node(
    name: str,
    allocatable: dict[str, str],
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}},
        "spec": {},
        "status": {
            "allocatable": {"cpu": "192", "memory": "1536Gi", **allocatable},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod_on(name: str, node_name: str, limits: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {
            "nodeName": node_name,
            "containers": [{"name": "c", "resources": {"limits": limits}}],
        },
        "status": {"phase": "Running"},
    }


def vgpu_register(healthy: int, unhealthy: int = 0) -> str:
    """The vGPU device plugin's node annotation: `uuid,count,memory,type,health,mode` per GPU."""
    gpus = [(i, "true") for i in range(healthy)] + [
        (healthy + i, "false") for i in range(unhealthy)
    ]
    return "".join(f"GPU-{i},10,81920,NVIDIA-A100-SXM4-80GB,{h},hami-core:" for i, h in gpus)


async def test_npu_amd_and_vgpu_nodes_have_capacity(kube) -> None:  # type: ignore[no-untyped-def]
    emulator, api = kube
    emulator.create(
        NODE_GVR,
        accelerator_node(
            "npu-0",
            {
                "huawei.com/Ascend910B2": "8",
                "huawei.com/Ascend910B2-memory": "524288",  # MiB, not devices
            },
            labels={"accelerator": "huawei-Ascend910"},
        ),
    )
    emulator.create(NODE_GVR, accelerator_node("npu-1", {"huawei.com/Ascend310P": "4"}))
    emulator.create(
        NODE_GVR,
        accelerator_node(
            "amd-0",
            {"amd.com/gpu": "8"},
            labels={"amd.com/gpu.product-name": "AMD_Instinct_MI300X"},
        ),
    )
    emulator.create(
        NODE_GVR,
        accelerator_node(
            "vgpu-0",
            # 8 GPUs split 10 ways; one GPU unhealthy
            {"volcano.sh/vgpu-number": "80", "volcano.sh/vgpu-memory": "655360"},
            labels={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
            annotations={VGPU_REGISTER: vgpu_register(7, unhealthy=1)},
        ),
    )
    # Without the register annotation Volcano schedules no vGPU there.
    emulator.create(NODE_GVR, accelerator_node("vgpu-1", {"volcano.sh/vgpu-number": "80"}))
    emulator.create(PODS, pod_on("train-0", "npu-0", {"huawei.com/Ascend910B2": "8"}))
    emulator.create(PODS, pod_on("infer-0", "npu-1", {"huawei.com/Ascend310P": "1"}))
    for i in range(9):  # 9 vGPU pods, each counted as a GPU: more than the node's 7
        emulator.create(PODS, pod_on(f"share-{i}", "vgpu-0", {"volcano.sh/vgpu-number": "1"}))

    source = KubernetesSource(api, watch_timeout_s=5)
    await source.start()
    try:
        nodes = source.current().nodes
        report = {n: (v.gpu_model, v.gpu_allocatable, v.gpu_used) for n, v in sorted(nodes.items())}
        assert report == {
            "amd-0": ("MI300X", 8, 0),  # the label's GFD-style name, as jobs name it
            "npu-0": ("Ascend910B2", 8, 8),
            "npu-1": ("Ascend310P", 4, 1),
            "vgpu-0": ("A100", 7, 7),  # full, never over-full
            "vgpu-1": ("", 0, 0),
        }
        emulator.patch(PODS, "train-0", {"status": {"phase": "Succeeded"}}, "ml")
        await eventually(lambda: source.current().nodes["npu-0"].gpu_used == 0)
    finally:
        await source.stop()
