"""A simulated agent's inventory reaches the REST API over real loopback gRPC, keeps flowing
as the cluster changes, and survives a Global restart without losing a change."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
from fastapi import FastAPI

from core_agent.client import AgentClient
from core_agent.simulated.cluster import ClusterSpec, SimulatedCluster
from tests.agents import run_agent
from tests.conftest import ADMIN_TOKEN
from tests.factories import create_cluster, eventually
from tests.server_process import free_port
from volcano_global.app import create_app
from volcano_global.rpc.shares import SharePhase, ShareStatus
from volcano_global.settings import Settings

SPEC = ClusterSpec.model_validate(
    {
        "nodeGroups": [
            {"count": 64, "gpusPerNode": 8, "gpuModel": "H100"},
            {"count": 16, "gpusPerNode": 4, "gpuModel": "A100"},
        ],
        "topology": {"tiers": [{"name": "tor", "size": 8}, {"name": "spine", "size": 5}]},
    }
)


def rest(app: FastAPI) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://t",
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    )


@asynccontextmanager
async def running_agent(
    app: FastAPI, api: httpx.AsyncClient, *, coalesce_s: float
) -> AsyncIterator[tuple[SimulatedCluster, AgentClient]]:
    """Cluster `sim` registered and its simulated agent streaming to `app` until the block ends."""
    token = (await create_cluster(api, "sim"))["agentToken"]
    cluster = SimulatedCluster.from_spec("sim", SPEC)
    client = AgentClient(
        cluster="sim",
        target=f"127.0.0.1:{app.state.grpc_port}",
        token=token,
        source=cluster,
        coalesce_s=coalesce_s,
    )
    stop = asyncio.Event()
    task = asyncio.create_task(client.run(stop=stop))
    try:
        yield cluster, client
    finally:
        stop.set()
        await task


async def capacity_of(api: httpx.AsyncClient) -> dict[str, tuple[int, int]]:
    body = (await api.get("/api/v1/clusters/sim")).json()
    return {c["gpuModel"]: (c["total"], c["free"]) for c in body["capacity"]}


async def test_simulated_agent_inventory_appears_and_follows_changes(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    async with running_agent(app, api, coalesce_s=0.05) as (cluster, client):

        async def full() -> bool:
            return await capacity_of(api) == {"A100": (64, 64), "H100": (512, 512)}

        await eventually(full)
        body = (await api.get("/api/v1/clusters/sim")).json()
        assert body["state"] == "Ready"
        assert body["nodes"] == {"total": 80, "ready": 80}
        topology = (await api.get("/api/v1/clusters/sim/topology")).json()["domains"]
        assert {d["tier"] for d in topology} == {1, 2}
        assert len(topology) == 10 + 2

        for i in range(10):  # a burst of changes
            cluster.update_node(f"sim-g0-{i:05d}", used_gpus=8)
        cluster.update_node("sim-g1-00000", ready=False)

        async def changed() -> bool:
            return await capacity_of(api) == {"A100": (64, 60), "H100": (512, 432)}

        await eventually(changed)
        assert client.seq <= 4  # snapshot + the burst coalesced into few deltas
        assert client.unacked == {} or max(client.unacked) <= client.seq


async def test_a_global_restart_loses_no_change(database_url: str) -> None:
    settings = Settings(
        database_url=database_url,
        admin_token=ADMIN_TOKEN,
        grpc_port=free_port(),
        agents={"shutdown_grace_s": 0.1},
    )
    cluster = SimulatedCluster.from_spec("sim", SPEC)
    first = create_app(settings)
    async with first.router.lifespan_context(first):
        async with rest(first) as api:
            token = (await create_cluster(api, "sim"))["agentToken"]
    stop = asyncio.Event()
    target = f"127.0.0.1:{settings.grpc_port}"
    task = run_agent("sim", cluster, target=target, token=token, stop=stop)
    try:
        first = create_app(settings)
        async with first.router.lifespan_context(first):
            async with rest(first) as api:
                await eventually(lambda: _has(api, "H100", (512, 512)))
        # The Global is down: the cluster keeps changing.
        cluster.update_node("sim-g0-00000", used_gpus=8)
        cluster.remove_node("sim-g0-00001")
        await asyncio.sleep(0.3)
        second = create_app(settings)
        async with second.router.lifespan_context(second):
            async with rest(second) as api:
                await eventually(lambda: _has(api, "H100", (504, 496)))
                assert (await api.get("/api/v1/clusters/sim")).json()["nodes"]["total"] == 79
    finally:
        stop.set()
        await task


async def _has(api: httpx.AsyncClient, model: str, expected: tuple[int, int]) -> bool:
    return (await capacity_of(api)).get(model) == expected


async def test_deltas_are_paced_by_the_coalescing_window(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    """Inventory changes go as at most one delta per window (jittered by a quarter)."""
    async with running_agent(app, api, coalesce_s=1.0) as (cluster, client):
        await eventually(lambda: client.acked >= 1)  # the snapshot
        synced = client.seq
        started = asyncio.get_running_loop().time()
        for i in range(50):  # a change every 50 ms for 2.5 s
            cluster.update_node(f"sim-g0-{i % 64:05d}", used_gpus=1 + i % 7)
            await asyncio.sleep(0.05)
        elapsed = asyncio.get_running_loop().time() - started
        deltas = client.seq - synced
        assert 2 <= deltas <= elapsed / 0.75 + 1  # one now, then one per 0.75-1.25 s window


async def test_a_report_written_mid_window_goes_before_the_windows_delta(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    """A status report does not wait for the coalescing window: written while a change waits
    in a 60 s window, it is acknowledged while that change's delta still waits (a wall-clock
    bound on the ack failed on loaded hosts)."""
    async with running_agent(app, api, coalesce_s=60.0) as (cluster, client):
        await eventually(lambda: client.acked >= 1)  # the snapshot
        cluster.update_node("sim-g0-00000", used_gpus=8)  # the first change goes at once
        await eventually(lambda: client.acked >= 2, within=30)  # below the window's 45-75 s
        cluster.update_node("sim-g0-00000", used_gpus=1)  # waits for the window
        # about a placement the Global does not know: acknowledged, nothing else (Accepted:
        # its nodes have not changed; a Running or ended report takes the delta with it)
        unknown = str(uuid.uuid4())
        client.report(ShareStatus(placement_id=unknown, job_uid="", phase=SharePhase.ACCEPTED))
        await eventually(lambda: not client.unacked_reports)
        assert client.seq == 2  # the window's delta has not gone yet


async def test_the_nodes_a_share_frees_or_takes_reach_the_global_before_its_report(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    """A share's end does not wait for the window, nor outrun the delta that frees its nodes:
    by the time the Global acknowledges the end, it has applied the freed nodes; and its start
    (Running) not the delta that shows the nodes it takes."""

    async def h100_free() -> int:
        return (await capacity_of(api))["H100"][1]

    async with running_agent(app, api, coalesce_s=60.0) as (cluster, client):
        await eventually(lambda: client.acked >= 1)  # the snapshot
        cluster.update_node("sim-g0-00000", used_gpus=8)  # the first change goes at once
        # (waits bounded below the window's 45-75 s: one that waited for it would fail)
        await eventually(lambda: client.acked >= 2, within=30)
        assert await h100_free() == 504
        cluster.update_node("sim-g0-00000", used_gpus=0)  # inside the 60 s window
        client.report(
            ShareStatus(placement_id=str(uuid.uuid4()), job_uid="", phase=SharePhase.SUCCEEDED)
        )
        await eventually(lambda: not client.unacked_reports, within=30)
        assert await h100_free() == 512
        cluster.update_node("sim-g0-00001", used_gpus=8)  # a share's pods start, inside it
        client.report(
            ShareStatus(placement_id=str(uuid.uuid4()), job_uid="", phase=SharePhase.RUNNING)
        )
        await eventually(lambda: not client.unacked_reports, within=30)
        assert await h100_free() == 504
