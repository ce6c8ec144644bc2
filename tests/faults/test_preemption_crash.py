"""A Global killed (SIGKILL) between preemption's two steps: right after the round that
evicted the victim and nominated the preemptor committed (`preempt-evicted`), or while the
preemptor's start is written but not committed (`preempt-start`). Nothing is lost or doubled:
the restarted Global starts the preemptor once, the victim was requeued once (and runs again
when the preemptor ends), and the cluster never runs more pods than it has nodes."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from core_agent.simulated.cluster import ClusterSpec, SimulatedCluster
from tests.agents import join
from tests.conftest import ADMIN_TOKEN
from tests.factories import REPLY_S, job_document
from tests.faults.crashes import crashed_at, until
from tests.server_process import ServerProcess
from volcano_global.rpc.shares import SharePhase

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
SPEC = ClusterSpec.model_validate(
    {"nodeGroups": [{"count": 2, "gpusPerNode": 8, "gpuModel": "H100"}]}
)


def doc(name: str, priority_class: str, estimate: str) -> dict:
    document = job_document(name, replicas=2, runningEstimate=estimate)
    document["spec"]["priorityClassName"] = priority_class
    return document


async def watch_pods(cluster: SimulatedCluster, stop: asyncio.Event, most: list[int]) -> None:
    """The most pods the cluster held at once (sampled every 10 ms)."""
    holding = (SharePhase.ACCEPTED, SharePhase.RUNNING)
    while not stop.is_set():
        pods = sum(s.assignment.pods for s in cluster.shares.values() if s.phase in holding)
        most[0] = max(most[0], pods)
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("point", ["preempt-evicted", "preempt-start"])
async def test_a_crash_between_evicting_and_starting_loses_nothing(
    postgres_server: ServerProcess, point: str
) -> None:
    server = postgres_server
    server.env["VGLOBAL_AGENTS__OUTBOX_POLL_S"] = "0.1"
    server.env["VGLOBAL_SCHEDULING__PREEMPTION__MIN_RUN_S"] = "0"
    server.env["VGLOBAL_FAILPOINTS"] = f"{point}=1"
    stop = asyncio.Event()
    east = SimulatedCluster.from_spec("east", SPEC)
    east.time_scale = 0.01
    most = [0]
    tasks: list[asyncio.Task] = []
    try:
        await asyncio.to_thread(server.start)
        async with httpx.AsyncClient(timeout=REPLY_S, base_url=server.url, headers=ADMIN) as api:
            tasks += [
                await join(api, "east", east, target=server.grpc_target, stop=stop),
                asyncio.create_task(watch_pods(east, stop, most)),
            ]
            low = await api.post("/api/v1/jobs", json=doc("low", "low-priority", "3600s"))
            low_uid = low.json()["uid"]
            await until(api, low_uid, lambda j: j["state"] == "Running")
            high = await api.post("/api/v1/jobs", json=doc("high", "high-priority", "300s"))
            high_uid = high.json()["uid"]

            await crashed_at(server, point)
            assert not [s for s in east.shares.values() if s.assignment.job_uid == high_uid]

            server.env.pop("VGLOBAL_FAILPOINTS")
            await asyncio.to_thread(server.start)
            job = await until(api, high_uid, lambda j: j["state"] == "Running")
            assert job["requeues"] == 0
            victim = await until(api, low_uid, lambda j: j["state"] == "Pending")
            assert victim["requeues"] == 1
            events = (await api.get(f"/api/v1/jobs/{low_uid}/events")).json()["items"]
            assert [e["reason"] for e in events].count("PodEvicted") == 1
            placed = (await api.get(f"/api/v1/jobs/{high_uid}/events")).json()["items"]
            assert [e["reason"] for e in placed].count("Placed") == 1
            assigned = [s for s in east.shares.values() if s.assignment.job_uid == high_uid]
            assert len(assigned) == 1
            # The preemptor ends (300 s x 0.01); the victim runs again.
            await until(api, high_uid, lambda j: j["state"] == "Succeeded", within=60)
            await until(api, low_uid, lambda j: j["state"] == "Running", within=60)
        assert most[0] <= 2, f"{most[0]} pods ran at once on 2 nodes"
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
