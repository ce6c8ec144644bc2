"""Jobs on every accelerator Volcano clusters run: NVIDIA, AMD, Huawei Ascend (as the device
plugins spell their resources) and Volcano vGPU are counted as GPUs and pin their model."""

from __future__ import annotations

from typing import Any

import pytest

from tests.factories import job_document
from volcano_global.errors import Invalid
from volcano_global.jobspec import NormalizedJob, ParseOptions, normalize_job
from volcano_global.jobspec.accelerators import is_accelerator, node_model

CONTAINER = "spec.tasks[0].template.spec.containers[0]"
OPTIONS = ParseOptions()


def parse(doc: dict[str, Any]) -> NormalizedJob:
    return normalize_job(doc, OPTIONS)


def errors_of(doc: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(Invalid) as caught:
        parse(doc)
    return {e.field: e.message for e in caught.value.errors}


def job_asking(limits: dict[str, Any], *, node_selector: dict[str, str] | None = None, **meta):  # type: ignore[no-untyped-def]
    doc = job_document(replicas=2)
    pod = doc["spec"]["tasks"][0]["template"]["spec"]
    pod["containers"][0]["resources"] = {"limits": limits}
    if node_selector:
        pod["nodeSelector"] = node_selector
    doc["metadata"].update(meta)
    return doc


@pytest.mark.parametrize(
    "resource",
    [
        "huawei.com/Ascend910",
        "huawei.com/Ascend910A",
        "huawei.com/Ascend910B",
        "huawei.com/Ascend910B2",
        "huawei.com/Ascend910B4-1",
        "huawei.com/Ascend910C",
        "huawei.com/Ascend310",
        "huawei.com/Ascend310P",
    ],
)
def test_an_8_npu_pod_is_an_8_accelerator_pod_of_that_chip(resource: str) -> None:
    job = parse(job_asking({resource: 8, f"{resource}-memory": 65536}))  # HAMi: MiB
    assert job.gang.total_gpus == 16
    (task,) = job.gang.tasks
    assert (task.resources.gpus, task.resources.gpu_resource) == (8, resource)
    # The resource names the chip: an Ascend910B2 job must not land on other NPUs or on GPUs.
    assert job.gang.gpu_model == resource.removeprefix("huawei.com/")


@pytest.mark.parametrize(
    "resource",
    [
        "huawei.com/Ascend910B2-memory",  # HAMi's device memory, in MiB
        "huawei.com/Ascend910B2-core",
        "huawei.com/Ascend910-2c",  # a static vNPU template: part of a chip
        "huawei.com/Ascend310P-4c.3cpu",
        "huawei.com/npu-core",
        "huawei.com/AscendReal",
        "volcano.sh/vgpu-memory",
        "volcano.sh/vgpu-cores",
    ],
)
def test_device_slices_and_memory_are_not_whole_accelerators(resource: str) -> None:
    assert not is_accelerator(resource)
    job = parse(job_asking({resource: 4}))
    assert job.gang.total_gpus == 0


def test_an_amd_job_takes_its_model_from_the_amd_label() -> None:
    job = parse(
        job_asking(
            {"amd.com/gpu": 8}, node_selector={"amd.com/gpu.product-name": "AMD_Instinct_MI300X"}
        )
    )
    assert (job.gang.total_gpus, job.gang.gpu_model) == (16, "MI300X")  # gpu_models.KNOWN
    # NVIDIA's label on an AMD pod says nothing about AMD devices.
    other = parse(job_asking({"amd.com/gpu": 8}, node_selector={"nvidia.com/gpu.product": "H100"}))
    assert other.gang.gpu_model is None


def test_a_vgpu_pod_counts_one_gpu_per_vgpu() -> None:
    # Each of a pod's vGPUs is on a different physical GPU, so 4 vGPUs need 4 GPUs.
    job = parse(
        job_asking(
            {"volcano.sh/vgpu-number": 4, "volcano.sh/vgpu-memory": 3000},
            node_selector={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
        )
    )
    (task,) = job.gang.tasks
    assert (task.resources.gpus, task.resources.gpu_resource) == (4, "volcano.sh/vgpu-number")
    assert (job.gang.total_gpus, job.gang.gpu_model) == (8, "A100")  # gpu_models.KNOWN


def test_an_ascend_job_pinned_to_another_model_is_refused() -> None:
    doc = job_asking(
        {"huawei.com/Ascend910B2": 8}, annotations={"global.volcano.sh/gpu-model": "H100"}
    )
    errors = errors_of(doc)
    assert "Ascend910B2" in errors["spec.tasks[0].template"]
    assert "'H100'" in errors["spec.tasks[0].template"]
    same = job_asking(
        {"huawei.com/Ascend910B2": 8}, annotations={"global.volcano.sh/gpu-model": "Ascend910B2"}
    )
    assert parse(same).gang.gpu_model == "Ascend910B2"


def test_one_kind_of_accelerator_per_pod_and_whole_devices() -> None:
    errors = errors_of(job_asking({"huawei.com/Ascend910B2": 8, "nvidia.com/gpu": 1}))
    assert "one kind of accelerator" in errors["spec.tasks[0].template.spec"]
    errors = errors_of(job_asking({"huawei.com/Ascend310P": "0.5"}))
    assert errors[f'{CONTAINER}.resources.limits["huawei.com/Ascend310P"]'] == (
        "must be a whole number of devices"
    )


def test_node_models() -> None:
    assert node_model("huawei.com/Ascend910B3", {"nvidia.com/gpu.product": "x"}) == "Ascend910B3"
    assert node_model("amd.com/gpu", {"beta.amd.com/gpu.product-name": "MI250"}) == "MI250"
    assert node_model("volcano.sh/vgpu-number", {"nvidia.com/gpu.product": "A10"}) == "A10"
    assert node_model("nvidia.com/gpu", {}) == ""


@pytest.mark.parametrize(
    ("typo", "nearest"),
    [
        ("nvidia.com/gpus", "nvidia.com/gpu"),
        ("nvidia.com/GPU", "nvidia.com/gpu"),
        ("nvida.com/gpu", "nvidia.com/gpu"),
        ("amd.com/gpus", "amd.com/gpu"),
        ("volcano.sh/vgpu-numbr", "volcano.sh/vgpu-number"),
    ],
)
def test_a_misspelt_gpu_resource_is_refused_with_the_nearest_name(typo: str, nearest: str) -> None:
    # Accepted, it was a job asking for no GPU that waited forever (issue 37).
    errors = errors_of(job_asking({typo: "8"}))
    message = errors[f'{CONTAINER}.resources.limits["{typo}"]']
    assert f"did you mean {nearest}?" in message


@pytest.mark.parametrize(
    "resource",
    ["nvidia.com/mig-1g.5gb", "nvidia.com/gpu.shared", "rdma/hca", "example.com/fpga"],
)
def test_other_extended_resources_are_accepted(resource: str) -> None:
    assert parse(job_asking({resource: "1", "nvidia.com/gpu": "8"})).gang.total_gpus == 16
