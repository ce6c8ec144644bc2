"""Jobs run across simulated member clusters end to end, over real gRPC and the real database:
placed (split over two clusters or whole in one), dispatched over the agent streams, Running
only when every share runs, Succeeded when every share has; and the cross-cluster gang's
failure paths: a share that does not start in time, a cancelled split job, a cluster lost while
the job runs."""

from __future__ import annotations

import asyncio
from typing import Any

from core_agent.simulated.cluster import ClusterSpec, SimulatedCluster
from tests.core_agent.federation import Federation, federation
from tests.factories import eventually, job_document, split_annotations

SPEC = ClusterSpec.model_validate(
    {
        "nodeGroups": [{"count": 8, "gpusPerNode": 8, "gpuModel": "H100"}],
        "topology": {"tiers": [{"name": "tor", "size": 4}]},
    }
)


def split_job(name: str = "train", *, seconds: str = "20s", **annotations: str) -> dict[str, Any]:
    """96 GPUs: more than one 64-GPU cluster holds; units of 4 pods."""
    doc = job_document(name, replicas=12, runningEstimate=seconds)
    doc["metadata"]["annotations"] = {**split_annotations(4, crossing_gbps=50), **annotations}
    return doc


async def two_clusters(fed: Federation, *, time_scale: float = 0.1) -> dict[str, SimulatedCluster]:
    clusters = {}
    for name in ("east", "west"):
        clusters[name] = SimulatedCluster.from_spec(name, SPEC)
        clusters[name].time_scale = time_scale
        await fed.join(name, clusters[name])
    await fed.link("east", "west")
    await fed.ready("east", "west")
    return clusters


def busy(clusters: dict[str, SimulatedCluster]) -> int:
    return sum(n.used_gpus for c in clusters.values() for n in c.nodes.values())


async def link_reserved(fed: Federation) -> float:
    return float((await fed.api.get("/api/v1/links")).json()["items"][0]["reservedGbps"])


async def test_a_split_job_and_a_whole_job_run_to_completion(database_url: str) -> None:
    async with federation(database_url) as fed:
        clusters = await two_clusters(fed)
        split = await fed.submit(split_job())
        whole = await fed.submit(job_document("small", replicas=2, runningEstimate="20s"))

        job = await fed.reach(split, "Running")
        assert sorted(s["cluster"] for s in job["placement"]["shares"]) == ["east", "west"]
        single = await fed.reach(whole, "Running")
        assert len(single["placement"]["shares"]) == 1
        assert busy(clusters) == 96 + 16  # the pods are bound in the simulated clusters
        assert await link_reserved(fed) == 50

        await fed.reach(split, "Succeeded")
        await fed.reach(whole, "Succeeded")
        assert (await fed.reasons(split))[:4] == ["Succeeded", "Running", "Dispatched", "Placed"]
        assert busy(clusters) == 0

        async def freed() -> bool:
            items = (await fed.api.get("/api/v1/clusters")).json()["items"]
            return all(c["capacity"][0]["free"] == 64 for c in items)

        await eventually(freed)
        assert await link_reserved(fed) == 0


async def test_a_gang_that_does_not_start_in_time_is_withdrawn_and_requeued(
    database_url: str,
) -> None:
    async with federation(database_url) as fed:
        clusters = await two_clusters(fed)
        clusters["west"].start_delay_s = 10_000  # west's pods never start (image pull stuck)
        # Long enough that east's share cannot finish before the timeout: a share that ends
        # before its peers started breaks the gang at once (reports.py), not at the timeout.
        uid = await fed.submit(
            split_job(seconds="10h", **{"global.volcano.sh/gang-start-timeout": "2"})
        )

        message = await fed.event(uid, "GangTimeout")
        assert "not every share started within 2 s" in message
        assert "west: Accepted" in message
        # Every share was withdrawn: the pods bound in both clusters are gone.
        clusters["west"].start_delay_s = 0
        await fed.reach(uid, "Running")  # requeued, placed again, and now it starts
        assert busy(clusters) == 96  # the first placement's pods did not leak
        assert sum(len(c.shares) for c in clusters.values()) == 2


async def test_cancelling_a_split_job_removes_every_share(database_url: str) -> None:
    async with federation(database_url) as fed:
        clusters = await two_clusters(fed)
        uid = await fed.submit(split_job(seconds="10h"))
        await fed.reach(uid, "Running")
        assert all(len(c.shares) == 1 for c in clusters.values())

        assert (await fed.api.post(f"/api/v1/jobs/{uid}/cancel")).status_code == 200
        await eventually(lambda: busy(clusters) == 0)
        assert all(not c.shares for c in clusters.values())
        assert (await fed.job(uid))["state"] == "Cancelled"
        assert await link_reserved(fed) == 0


async def test_a_cluster_lost_while_running_requeues_the_job(database_url: str) -> None:
    async with federation(database_url, agents={"heartbeat_timeout_s": 1.5}) as fed:
        clusters = await two_clusters(fed)
        uid = await fed.submit(split_job(seconds="10h"))
        await fed.reach(uid, "Running")

        await fed.leave("west")  # west's agent goes silent: NotReady after 1.5 s

        await fed.event(uid, "PodEvicted")
        job = await fed.job(uid)
        assert job["state"] == "Pending"
        assert "cluster west" in job["stateMessage"]
        assert "requeued (retry 1/3)" in job["stateMessage"]
        await eventually(lambda: busy({"east": clusters["east"]}) == 0)  # east's share withdrawn

        await fed.join("west", clusters["west"])  # back: the cancellation waiting for it lands
        await fed.reach(uid, "Running")
        assert busy(clusters) == 96  # placed again once, nothing duplicated


async def test_a_cluster_whose_inventory_never_rests_stays_ready(database_url: str) -> None:
    """Changes every 50 ms for 3x the NotReady timeout: the agent's heartbeats still go out on
    their period (they used to wait for a quiet moment that never came), so no NotReady."""
    # 3 s: the deltas (as good as heartbeats) come every ~1 s +- a quarter (the agent's
    # window); with 2 s one busy moment of the CI machine made it NotReady.
    async with federation(database_url, agents={"heartbeat_timeout_s": 3}) as fed:
        east = SimulatedCluster.from_spec("east", SPEC)
        await fed.join("east", east)
        await fed.ready("east")
        names = sorted(east.nodes)
        for i in range(180):
            east.update_node(names[i % len(names)], used_gpus=i % 9)
            await asyncio.sleep(0.05)
        cluster = (await fed.api.get("/api/v1/clusters/east")).json()
        assert cluster["state"] == "Ready"
        events = (await fed.api.get("/api/v1/clusters/east/events")).json()["items"]
        assert [e for e in events if e["reason"] == "NotReady"] == []
