"""An elastic job end to end (real server, real gRPC, simulated member clusters): it starts at
the width that fits, and when room frees the round resizes it (checkpoint-restart at the new
width: the old placement's shares cancelled, the new ones dispatched with the new world size)
and it runs on to completion."""

from __future__ import annotations

import json

from core_agent.simulated.cluster import ClusterSpec, SimulatedCluster
from tests.core_agent.federation import Federation, federation
from tests.factories import elastic_document, eventually, job_document, split_annotations


async def link_reserved(fed: Federation) -> float:
    return float((await fed.api.get("/api/v1/links")).json()["items"][0]["reservedGbps"])


# Resized seconds after a start (the server's clock is not scaled as the clusters' are), and
# replicas taken back from a job that has just started.
EAGER = {"scheduling": {"elastic": {"min_interval_s": 0}, "preemption": {"min_run_s": 0}}}
SPEC = ClusterSpec.model_validate(
    {
        "nodeGroups": [{"count": 8, "gpusPerNode": 8, "gpuModel": "H100"}],
        "topology": {"tiers": [{"name": "tor", "size": 4}]},
    }
)


async def simulated(fed: Federation, name: str) -> SimulatedCluster:
    """A cluster of SPEC, its jobs running 50 times faster than their estimates, joined and
    Ready."""
    cluster = SimulatedCluster.from_spec(name, SPEC)
    cluster.time_scale = 0.02
    await fed.join(name, cluster)
    await fed.ready(name)
    return cluster


async def eight_wide(fed: Federation) -> str:
    """An elastic job of 8 replicas (down to 2) that runs at its full width: its uid. It runs
    for 2 min of wall time (its hour at 50x), so that it is still running when a test on a
    loaded machine waits for it to grow back (600 s, 12 s here, ended first once under CI's
    load, and a job that has ended never grows)."""
    uid = await fed.submit(
        elastic_document("elastic", replicas=8, minAvailable=2, runningEstimate="6000s")
    )
    job = await fed.reach(uid, "Running")
    assert [s["pods"] for s in job["placement"]["shares"]] == [8]
    return uid


async def running_shares(fed: Federation, uid: str) -> list[int] | None:
    """The pods of each of the job's shares while it runs; None while it does not."""
    job = await fed.job(uid)
    shares = (job.get("placement") or {}).get("shares") or []
    return [s["pods"] for s in shares] if job["state"] == "Running" else None


async def test_an_elastic_job_starts_narrow_and_grows_when_room_frees(database_url: str) -> None:
    async with federation(database_url, **EAGER) as fed:
        east = await simulated(fed, "east")
        blocker = await fed.submit(job_document("blocker", replicas=4, runningEstimate="200s"))
        await fed.reach(blocker, "Running")
        # 8 pods, elastic down to 2 (opted in, minAvailable below the replicas): 4 nodes free.
        elastic = elastic_document("elastic", replicas=8, minAvailable=2, runningEstimate="600s")
        uid = await fed.submit(elastic)
        job = await fed.reach(uid, "Running")
        assert [(s["cluster"], s["pods"]) for s in job["placement"]["shares"]] == [("east", 4)]
        narrow = [s.assignment for s in east.shares.values() if s.assignment.job_uid == uid]
        assert [(a.pods, a.world_pods) for a in narrow] == [(4, 4)]

        await fed.reach(blocker, "Succeeded")
        message = await fed.event(uid, "Resized")
        assert message.startswith("Resized 4 -> 8 replicas")

        async def wide() -> bool:
            return await running_shares(fed, uid) == [8]

        await eventually(wide)
        grown = [s.assignment for s in east.shares.values() if s.assignment.job_uid == uid]
        assert [(a.pods, a.world_pods, a.rank_offset) for a in grown] == [(8, 8, 0)]
        job = await fed.job(uid)
        assert job["requeues"] == 0  # a resize is no retry
        await fed.reach(uid, "Succeeded")


async def test_an_elastic_job_grows_into_a_second_cluster_and_reserves_the_link(
    database_url: str,
) -> None:
    async with federation(database_url, **EAGER) as fed:
        clusters = {name: await simulated(fed, name) for name in ("east", "west")}
        await fed.link("east", "west")
        short = await fed.submit(job_document("short", replicas=8, runningEstimate="200s"))
        full = (await fed.reach(short, "Running"))["placement"]["shares"][0]["cluster"]
        other = "west" if full == "east" else "east"
        long = await fed.submit(job_document("long", replicas=4, runningEstimate="600s"))
        assert (await fed.reach(long, "Running"))["placement"]["shares"][0]["cluster"] == other
        # 6 replicas of 2 pods, at least 2; may split over 2 clusters at 50 Gbps V/tau.
        doc = elastic_document("elastic", replicas=12, minAvailable=4, runningEstimate="600s")
        doc["metadata"]["annotations"] |= split_annotations(2, crossing_gbps=50, max_clusters=2)
        uid = await fed.submit(doc)
        job = await fed.reach(uid, "Running")
        assert [(s["cluster"], s["pods"]) for s in job["placement"]["shares"]] == [(other, 4)]
        assert await link_reserved(fed) == 0  # one cluster: nothing crosses

        await fed.reach(short, "Succeeded")
        message = await fed.event(uid, "Resized")
        assert message.startswith("Resized 2 -> 6 replicas")

        async def grown() -> bool:
            return len(await running_shares(fed, uid) or []) == 2

        await eventually(grown)
        job = await fed.job(uid)
        assert [(s["cluster"], s["pods"]) for s in job["placement"]["shares"]] == [
            (other, 4),
            (full, 8),
        ]
        # Two clusters: each pair reserves demand(2) = 2 x 50 / 2 Gbps.
        assert await link_reserved(fed) == 50
        pods = [
            (a.cluster_index, a.rank_offset, a.pods, a.world_pods)
            for c in clusters.values()
            for a in (s.assignment for s in c.shares.values())
            if a.job_uid == uid
        ]
        assert sorted(pods) == [(0, 0, 4, 12), (1, 4, 8, 12)]
        # The resize's assignments name the job's Volcano Queue, as the first placement's do:
        # the agent of the cluster grown into makes it exist there before the member job.
        queues = [
            json.loads(a.queue_json)["metadata"]["name"] if a.queue_json else None
            for c in clusters.values()
            for a in (s.assignment for s in c.shares.values())
            if a.job_uid == uid
        ]
        assert queues == ["default", "default"]


async def test_a_higher_priority_job_takes_replicas_an_elastic_job_holds(
    database_url: str,
) -> None:
    async with federation(database_url, **EAGER) as fed:
        await simulated(fed, "east")
        uid = await eight_wide(fed)
        vip = await fed.submit(
            job_document(
                "vip", replicas=3, runningEstimate="200s", priorityClassName="high-priority"
            )
        )
        message = await fed.event(uid, "Resized")
        assert message.startswith("Resized 8 -> 5 replicas (gives back replicas")
        await fed.reach(vip, "Running")
        job = await fed.reach(uid, "Running")
        assert [s["pods"] for s in job["placement"]["shares"]] == [5]
        await fed.reach(vip, "Succeeded")
        # Room again: it grows back to its 8 replicas.

        async def wide() -> bool:
            return await running_shares(fed, uid) == [8]

        await eventually(wide)


async def test_room_planned_for_a_job_that_cannot_start_is_given_back_before_another_takes_it(
    database_url: str,
) -> None:
    """A shrink is planned for a high-priority job its queue's capability then holds back;
    the room it frees goes to another waiting job in the same round. The elastic job gives the
    room back first: the cluster's placed pods never exceed its 8 nodes."""
    async with federation(database_url, **EAGER) as fed:
        await simulated(fed, "east")
        created = await fed.api.post(
            "/api/v1/queues", json={"name": "capped", "weight": 1, "gpuQuota": 16}
        )
        assert created.status_code == 201, created.text
        uid = await eight_wide(fed)
        vip = await fed.submit(
            job_document(
                "vip",
                queue="capped",
                replicas=3,  # 24 GPUs: over its queue's 16
                runningEstimate="200s",
                priorityClassName="high-priority",
            )
        )
        filler = await fed.submit(job_document("filler", replicas=3, runningEstimate="200s"))
        await fed.reach(filler, "Running")

        async def placed() -> int:
            pods = 0
            for key in (uid, filler):
                shares = ((await fed.job(key)).get("placement") or {}).get("shares") or []
                pods += sum(s["pods"] for s in shares)
            return pods

        assert await placed() <= 8
        assert (await fed.event(uid, "Resized")).startswith("Resized 8 -> 5 replicas")
        assert (await fed.job(vip))["state"] == "Pending"
