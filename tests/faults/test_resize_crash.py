"""A Global killed (SIGKILL, failpoint `round-commit`) while a round's resize of an elastic job
is written but not committed: nothing is lost. The job keeps running on its old placement, no
cancellation or assignment of the half-written resize went out, and the restarted Global
resizes it once."""

from __future__ import annotations

import asyncio

import httpx

from core_agent.simulated.cluster import ClusterSpec, SimulatedCluster
from tests.agents import join
from tests.conftest import ADMIN_TOKEN
from tests.factories import REPLY_S, elastic_document, job_document
from tests.faults.crashes import crashed_at, until
from tests.server_process import ServerProcess

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
SPEC = ClusterSpec.model_validate(
    {"nodeGroups": [{"count": 8, "gpusPerNode": 8, "gpuModel": "H100"}]}
)


def shares(job: dict) -> list[int]:
    return [s["pods"] for s in (job.get("placement") or {}).get("shares") or []]


async def test_a_crash_during_a_resize_loses_nothing(postgres_server: ServerProcess) -> None:
    server = postgres_server
    server.env["VGLOBAL_AGENTS__OUTBOX_POLL_S"] = "0.1"
    server.env["VGLOBAL_SCHEDULING__ELASTIC__MIN_INTERVAL_S"] = "0"  # grow seconds after start
    # Rounds that write something: the blocker's placement (1), the elastic job's (2), its
    # resize when the blocker ends (3).
    server.env["VGLOBAL_FAILPOINTS"] = "round-commit=3"
    stop = asyncio.Event()
    east = SimulatedCluster.from_spec("east", SPEC)
    east.time_scale = 0.05
    agent_task = None
    try:
        await asyncio.to_thread(server.start)
        async with httpx.AsyncClient(timeout=REPLY_S, base_url=server.url, headers=ADMIN) as api:
            agent_task = await join(api, "east", east, target=server.grpc_target, stop=stop)
            blocker = (
                await api.post(
                    "/api/v1/jobs", json=job_document("blocker", replicas=4, runningEstimate="60s")
                )
            ).json()["uid"]
            await until(api, blocker, lambda j: j["state"] == "Running")
            doc = elastic_document("elastic", replicas=8, minAvailable=2, runningEstimate="300s")
            uid = (await api.post("/api/v1/jobs", json=doc)).json()["uid"]
            await until(api, uid, lambda j: j["state"] == "Running" and shares(j) == [4])
            old = [
                s.assignment.placement_id
                for s in east.shares.values()
                if s.assignment.job_uid == uid
            ]

            # The blocker ends; the resize round dies before its commit.
            await crashed_at(server, "round-commit")
            # Nothing of the half-written resize reached the cluster: the old share runs on.
            assert [
                s.assignment.placement_id
                for s in east.shares.values()
                if s.assignment.job_uid == uid
            ] == old

            server.env.pop("VGLOBAL_FAILPOINTS")
            await asyncio.to_thread(server.start)
            job = await until(api, uid, lambda j: j["state"] == "Running" and shares(j) == [8])
            assert job["requeues"] == 0
            events = (await api.get(f"/api/v1/jobs/{uid}/events")).json()["items"]
            assert [e["message"][:22] for e in events if e["reason"] == "Resized"] == [
                "Resized 4 -> 8 replica"
            ]
    finally:
        stop.set()
        if agent_task is not None:
            await asyncio.gather(agent_task, return_exceptions=True)
