"""An elastic job end to end (real server, real gRPC, simulated member clusters): it starts at
the width that fits, and when room frees the round resizes it (checkpoint-restart at the new
width: the old placement's shares cancelled, the new ones dispatched with the new world size)
and it runs on to completion."""

from __future__ import annotations

from core_agent.simulated.cluster import ClusterSpec, SimulatedCluster
from tests.core_agent.federation import federation
from tests.factories import eventually, job_document

SPEC = ClusterSpec.model_validate(
    {
        "nodeGroups": [{"count": 8, "gpusPerNode": 8, "gpuModel": "H100"}],
        "topology": {"tiers": [{"name": "tor", "size": 4}]},
    }
)


async def test_an_elastic_job_starts_narrow_and_grows_when_room_frees(database_url: str) -> None:
    async with federation(database_url) as fed:
        east = SimulatedCluster.from_spec("east", SPEC)
        east.time_scale = 0.05
        await fed.join("east", east)
        await fed.ready("east")
        blocker = await fed.submit(job_document("blocker", replicas=4, runningEstimate="60s"))
        await fed.reach(blocker, "Running")
        # 8 pods, elastic down to 2 (Volcano's minAvailable below the replicas): 4 nodes free.
        elastic = job_document("elastic", replicas=8, minAvailable=2, runningEstimate="200s")
        uid = await fed.submit(elastic)
        job = await fed.reach(uid, "Running")
        assert [(s["cluster"], s["pods"]) for s in job["placement"]["shares"]] == [("east", 4)]
        narrow = [s.assignment for s in east.shares.values() if s.assignment.job_uid == uid]
        assert [(a.pods, a.world_pods) for a in narrow] == [(4, 4)]

        await fed.reach(blocker, "Succeeded", within=30)
        message = await fed.event(uid, "Resized", within=30)
        assert message.startswith("Resized 4 -> 8 replicas")

        async def wide() -> bool:
            job = await fed.job(uid)
            shares = (job.get("placement") or {}).get("shares") or []
            return job["state"] == "Running" and [s["pods"] for s in shares] == [8]

        await eventually(wide, within=30)
        grown = [s.assignment for s in east.shares.values() if s.assignment.job_uid == uid]
        assert [(a.pods, a.world_pods, a.rank_offset) for a in grown] == [(8, 8, 0)]
        job = await fed.job(uid)
        assert job["requeues"] == 0  # a resize is no retry
        await fed.reach(uid, "Succeeded", within=60)
