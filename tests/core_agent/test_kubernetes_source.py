"""The Kubernetes source through the real kubernetes-asyncio client against the emulator."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable

import pytest

from core_agent.kubernetes.source import NODES, KubernetesSource
from core_agent.kubernetes.watcher import Progress, list_then_watch
from tests.agents import run_agent
from tests.core_agent.kube_objects import node, pod, populate
from tests.factories import create_cluster, eventually
from tests.k8s_emulator.server import NODES as NODE_GVR
from tests.k8s_emulator.server import PODS, KubeEmulator


@pytest.fixture
async def listed(kube) -> AsyncIterator[tuple[KubeEmulator, KubernetesSource]]:  # type: ignore[no-untyped-def]
    """The emulator holding `populate`'s cluster, and a source that has listed it (pages of 4)
    and watches it."""
    emulator, api = kube
    populate(emulator)
    source = KubernetesSource(api, page_size=4, watch_timeout_s=5)
    await source.start()
    yield emulator, source
    await source.stop()


async def test_initial_list_with_pages_and_topology(
    listed: tuple[KubeEmulator, KubernetesSource],
) -> None:
    emulator, source = listed
    inventory = source.current()
    assert sorted(inventory.nodes) == [f"n{i}" for i in range(6)]
    n0, n1, n2 = (inventory.nodes[n] for n in ("n0", "n1", "n2"))
    assert (n0.gpu_allocatable, n0.gpu_used, n0.gpu_model, n0.cpu_used_millis) == (
        8,
        8,
        "H100",
        4000,
    )
    assert (n1.gpu_used, n2.gpu_used) == (2, 0)  # a finished pod uses nothing
    assert n0.memory_allocatable_bytes == 2**40
    assert n0.ready
    assert (inventory.nodes["n4"].domain, n0.domain) == ("tor1", "tor0")
    assert inventory.domains["tor0"].parent == "spine"
    assert inventory.domains["spine"].tier == 2
    node_lists = [
        r for r in emulator.requests if r.startswith("GET /api/v1/nodes?") and "watch" not in r
    ]
    assert len(node_lists) == 2
    assert "continue=" in node_lists[1]  # 6 nodes in pages of 4


async def test_watch_updates(listed: tuple[KubeEmulator, KubernetesSource]) -> None:
    emulator, source = listed
    emulator.create(NODE_GVR, node("n6", gpus=4))
    await eventually(lambda: "n6" in source.current().nodes)
    emulator.patch(NODE_GVR, "n5", {"status": {"allocatable": {"nvidia.com/gpu": "4"}}})
    await eventually(lambda: source.current().nodes["n5"].gpu_allocatable == 4)
    emulator.patch(
        NODE_GVR, "n4", {"status": {"conditions": [{"type": "Ready", "status": "False"}]}}
    )
    await eventually(lambda: not source.current().nodes["n4"].ready)
    emulator.create(PODS, pod("p2", "n3", 4))
    await eventually(lambda: source.current().nodes["n3"].gpu_used == 4)
    emulator.patch(PODS, "p0", {"status": {"phase": "Succeeded"}}, "ml")
    await eventually(lambda: source.current().nodes["n0"].gpu_used == 0)
    emulator.delete(NODE_GVR, "n6")
    await eventually(lambda: "n6" not in source.current().nodes)


async def test_expired_resource_version_lists_again(kube) -> None:  # type: ignore[no-untyped-def]
    emulator, api = kube
    populate(emulator)
    original = api.list_page
    compactions = {"done": False}

    async def list_then_compact(kind, *, limit, token):  # type: ignore[no-untyped-def]
        page = await original(kind, limit=limit, token=token)
        if not page["metadata"].get("continue") and not compactions["done"]:
            compactions["done"] = True
            emulator.create(NODE_GVR, node("late"))  # happens after the list...
            emulator.compact()  # ...and its event is no longer in the history
        return page

    api.list_page = list_then_compact
    store: dict = {}
    await asyncio.wait_for(
        list_then_watch(
            api,
            NODES,
            store,
            lambda: None,
            page_size=4,
            watch_timeout_s=1,
            progress=Progress(),
            watches=2,
        ),
        10,
    )
    assert "/late" in store  # the relist after 410 saw it
    watches = [r for r in emulator.requests if "watch=" in r and "/api/v1/nodes" in r]
    assert len(watches) == 2  # the first got 410 Gone


async def test_without_hypernodes_tiers_come_from_labels(kube) -> None:  # type: ignore[no-untyped-def]
    emulator, api = kube
    emulator.create(
        NODE_GVR,
        node("a", **{"topology.kubernetes.io/rack": "r1", "topology.kubernetes.io/zone": "z1"}),
    )
    emulator.create(
        NODE_GVR,
        node("b", **{"topology.kubernetes.io/rack": "r2", "topology.kubernetes.io/zone": "z1"}),
    )
    source = KubernetesSource(
        api,
        tier_labels=["topology.kubernetes.io/rack", "topology.kubernetes.io/zone"],
        watch_timeout_s=5,
    )
    await source.start()
    try:
        inventory = source.current()
        assert inventory.nodes["a"].domain == "rack-r1"
        assert inventory.domains["rack-r2"].parent == "zone-z1"
        assert inventory.domains["zone-z1"].tier == 2
    finally:
        await source.stop()


async def test_a_kubernetes_agent_inventory_reaches_the_global(kube, app, api) -> None:  # type: ignore[no-untyped-def]
    emulator, kube_api = kube
    populate(emulator)
    token = (await create_cluster(api, "k8s"))["agentToken"]
    source = KubernetesSource(kube_api, page_size=4, watch_timeout_s=5)
    stop = asyncio.Event()
    target = f"127.0.0.1:{app.state.grpc_port}"
    task = run_agent("k8s", source, target=target, token=token, stop=stop)

    async def capacity() -> list:
        return (await api.get("/api/v1/clusters/k8s")).json()["capacity"]

    try:
        await eventually(
            lambda: _equals(capacity(), [{"gpuModel": "H100", "total": 48, "free": 38, "used": 10}])
        )
        emulator.create(PODS, pod("p9", "n5", 8))  # a pod bound in the member cluster
        await eventually(
            lambda: _equals(capacity(), [{"gpuModel": "H100", "total": 48, "free": 30, "used": 18}])
        )
        topology = (await api.get("/api/v1/clusters/k8s/topology")).json()["domains"]
        assert [d["name"] for d in topology] == ["spine", "tor0", "tor1"]
    finally:
        stop.set()
        await task


async def _equals(value: Awaitable[list], expected: list) -> bool:
    return await value == expected
