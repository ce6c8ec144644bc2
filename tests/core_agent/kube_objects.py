"""Member-cluster objects for tests against the Kubernetes API emulator."""

from __future__ import annotations

from tests.k8s_emulator.server import HYPERNODES, PODS, KubeEmulator
from tests.k8s_emulator.server import NODES as NODE_GVR


def node(name: str, *, gpus: int = 8, ready: bool = True, **labels: str) -> dict:
    return {
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.product": "H100", **labels}},
        "spec": {},
        "status": {
            "allocatable": {"nvidia.com/gpu": str(gpus), "cpu": "96", "memory": "1Ti"},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def pod(name: str, node_name: str, gpus: int, phase: str = "Running") -> dict:
    return {
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {
            "nodeName": node_name,
            "containers": [
                {
                    "name": "c",
                    "resources": {
                        "limits": {"nvidia.com/gpu": str(gpus)},
                        "requests": {"cpu": "4"},
                    },
                }
            ],
        },
        "status": {"phase": phase},
    }


def hypernode(name: str, tier: int, members: list[dict]) -> dict:
    return {
        "metadata": {"name": name},
        "spec": {"tier": tier, "tierName": f"t{tier}", "members": members},
    }


def populate(emulator: KubeEmulator) -> None:
    emulator.register(HYPERNODES, "HyperNode", namespaced=False)
    for i in range(6):
        emulator.create(NODE_GVR, node(f"n{i}"))
    emulator.create(
        HYPERNODES,
        hypernode("tor0", 1, [{"type": "Node", "selector": {"regexMatch": {"pattern": "n[0-2]"}}}]),
    )
    emulator.create(
        HYPERNODES,
        hypernode(
            "tor1",
            1,
            [{"type": "Node", "selector": {"exactMatch": {"name": n}}} for n in ("n3", "n4", "n5")],
        ),
    )
    emulator.create(
        HYPERNODES,
        hypernode(
            "spine",
            2,
            [
                {"type": "HyperNode", "selector": {"exactMatch": {"name": t}}}
                for t in ("tor0", "tor1")
            ],
        ),
    )
    emulator.create(PODS, pod("p0", "n0", 8))
    emulator.create(PODS, pod("p1", "n1", 2))
    emulator.create(PODS, pod("done", "n2", 8, phase="Succeeded"))
