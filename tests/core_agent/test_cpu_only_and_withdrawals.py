"""A CPU-only job runs in a simulated cluster, and a gang its cluster refuses at once is not
placed and withdrawn again every round (issue 37: ~5 withdrawals a second before)."""

from __future__ import annotations

import asyncio
import logging

from core_agent.simulated.cluster import ClusterSpec, SimulatedCluster
from tests.core_agent.federation import Federation, federation
from tests.factories import job_document
from volcano_global.services.scheduling.withdrawals import MAX_WAIT_S, wait_after

SPEC = ClusterSpec.model_validate(
    {
        "nodeGroups": [{"count": 4, "gpusPerNode": 8, "gpuModel": "H100"}],
        "topology": {"tiers": [{"name": "tor", "size": 2}]},
    }
)


async def one_cluster(fed: Federation) -> SimulatedCluster:
    cluster = SimulatedCluster.from_spec("east", SPEC)
    cluster.time_scale = 0.05
    await fed.join("east", cluster)
    await fed.ready("east")
    return cluster


async def withdrawals(fed: Federation, uid: str) -> int:
    items = (await fed.api.get(f"/api/v1/jobs/{uid}/events")).json()["items"]
    return sum(e["count"] for e in items if e["reason"] == "GangWithdrawn")


async def test_a_cpu_only_job_runs_to_completion(database_url: str) -> None:
    async with federation(database_url) as fed:
        await one_cluster(fed)
        doc = job_document("preprocess", replicas=3, runningEstimate="10s")
        container = doc["spec"]["tasks"][0]["template"]["spec"]["containers"][0]
        container["resources"] = {"requests": {"cpu": "4", "memory": "8Gi"}}
        uid = await fed.submit(doc)
        job = await fed.reach(uid, "Succeeded")
        assert job["totalGpus"] == 0
        assert "GangWithdrawn" not in await fed.reasons(uid)


async def test_a_gang_refused_at_once_waits_before_it_is_placed_again(database_url: str) -> None:
    async with federation(database_url) as fed:
        cluster = await one_cluster(fed)
        for node in cluster.nodes.values():
            node.used_gpus = node.gpus  # busy, but the Global's inventory says free
        uid = await fed.submit(job_document("train", replicas=2, runningEstimate="10s"))
        await fed.event(uid, "GangWithdrawn")
        await asyncio.sleep(2.5)  # absence of a loop: nothing to await but time
        assert await withdrawals(fed, uid) <= 2
        for node in cluster.nodes.values():
            node.used_gpus = 0
        await fed.reach(uid, "Succeeded")


def test_the_wait_doubles_up_to_a_cap() -> None:
    assert [wait_after(n) for n in (1, 2, 3, 4)] == [0.0, 5.0, 10.0, 20.0]
    assert wait_after(50) == MAX_WAIT_S


async def test_a_healthy_agent_says_what_it_does(database_url: str, caplog) -> None:  # type: ignore[no-untyped-def]
    caplog.set_level(logging.INFO, logger="core_agent.client")
    async with federation(database_url) as fed:
        await one_cluster(fed)
        uid = await fed.submit(job_document("train", replicas=2, runningEstimate="10s"))
        await fed.reach(uid, "Succeeded")
    lines = [r.getMessage() for r in caplog.records if r.name == "core_agent.client"]
    assert any(line.startswith("connected to the Global at") for line in lines)
    assert any(line.startswith("inventory snapshot sent: 4 nodes") for line in lines)
    phases = [line.rsplit(": ", 1)[1] for line in lines if f"of job {uid}:" in line]
    assert phases == ["Accepted", "Running", "Succeeded"]
