"""Level-triggered reconciliation over real gRPC, the real scheduling loop and the real
database, with simulated member clusters: an agent restarted within the heartbeat timeout (a
simulated agent that restarts is a cluster whose workloads are gone) lists the shares it holds,
and the Global re-sends what never started, fails the gang of what was running, and its books
are right again; a share that succeeds before its peer starts breaks the gang."""

from __future__ import annotations

import time

from core_agent.simulated.cluster import SimulatedCluster
from tests.core_agent.federation import Federation, federation
from tests.core_agent.test_dispatch_end_to_end import SPEC, busy, split_job, two_clusters
from tests.factories import eventually, job_document

ACTIVE = {"Placed", "Dispatched", "Running"}


async def booked(fed: Federation, cluster: str, uids: list[str]) -> int:
    """GPUs the Global's books hold in `cluster` for these jobs' active placements."""
    total = 0
    for uid in uids:
        job = await fed.job(uid)
        if job["state"] in ACTIVE and job.get("placement"):
            total += sum(s["gpus"] for s in job["placement"]["shares"] if s["cluster"] == cluster)
    return total


async def cluster_events(fed: Federation, name: str) -> list[dict[str, str]]:
    return list((await fed.api.get(f"/api/v1/clusters/{name}/events")).json()["items"])


async def test_an_agent_restarted_within_the_heartbeat_timeout_reconciles_its_shares(
    database_url: str,
) -> None:
    async with federation(database_url) as fed:  # NotReady after the default 30 s: never here
        east = SimulatedCluster.from_spec("east", SPEC)
        await fed.join("east", east)
        await fed.ready("east")
        started = await fed.submit(job_document("started", replicas=4, runningEstimate="10h"))
        await fed.reach(started, "Running")
        east.start_delay_s = 1e9  # the next job's pods are bound but never start
        waiting = await fed.submit(job_document("waiting", replicas=2, runningEstimate="10h"))
        await fed.reach(waiting, "Dispatched")
        assert busy({"east": east}) == 48

        await fed.leave("east")
        restarted = SimulatedCluster.from_spec("east", SPEC)  # its workloads are gone
        returned = time.monotonic()
        await fed.join("east", restarted)

        samples: list[int] = []

        async def books_right() -> bool:
            samples.append(await booked(fed, "east", [started, waiting]))
            return (await fed.job(started))["state"] != "Running"

        await eventually(books_right)
        settled_s = time.monotonic() - returned
        message = await fed.event(started, "PodEvicted")
        assert "cluster east no longer holds its share (4 pods, 32 GPUs)" in message
        assert "requeued (retry 1/3)" in message
        lost = [e for e in await cluster_events(fed, "east") if e["reason"] == "ShareLost"]
        assert len(lost) == 1 and "job ml/started" in lost[0]["message"]

        # The share that never started is sent again and runs in the restarted cluster; the
        # lost one is placed again, once.
        await fed.reach(waiting, "Running")
        await fed.reach(started, "Running")
        assert len(restarted.shares) == 2
        assert busy({"east": restarted}) == 48 == await booked(fed, "east", [started, waiting])
        assert max(samples) <= 64, samples  # never over capacity in the Global's books
        print(f"books right {settled_s:.2f} s after the agent's return")
        assert settled_s < 5


async def test_a_share_that_succeeds_before_its_peer_starts_breaks_the_gang(
    database_url: str,
) -> None:
    async with federation(database_url) as fed:
        clusters = await two_clusters(fed)
        clusters["east"].time_scale = 0.0001  # east's share runs and ends at once
        clusters["west"].start_delay_s = 1e9  # west's never starts
        uid = await fed.submit(split_job(seconds="20s"))

        message = await fed.event(uid, "GangWithdrawn")
        assert "ended before every share started: the gang is broken" in message
        assert "Running" not in await fed.reasons(uid)  # never shown started together

        clusters["east"].time_scale = clusters["west"].time_scale = 0.1
        clusters["west"].start_delay_s = 0
        await fed.reach(uid, "Running")  # requeued and placed again: now it starts together
        await fed.reach(uid, "Succeeded")


async def test_a_share_gone_without_a_word_is_found_by_the_periodic_list(
    database_url: str,
) -> None:
    """No restart, no report: the workload vanished from the cluster (as a Volcano Job deleted
    while its watch was down). The next periodic list (every second here) finds it lost."""
    async with federation(database_url, agents={"share_inventory_interval_s": 1}) as fed:
        east = SimulatedCluster.from_spec("east", SPEC)
        await fed.join("east", east)
        await fed.ready("east")
        uid = await fed.submit(job_document("train", replicas=2, runningEstimate="10h"))
        await fed.reach(uid, "Running")
        (placement,) = list(east.shares)
        share = east.shares.pop(placement)  # gone in the cluster; the agent says nothing
        if share.timer is not None:
            share.timer.cancel()

        message = await fed.event(uid, "PodEvicted")
        assert "cluster east no longer holds its share (2 pods, 16 GPUs)" in message
        assert "(periodic)" in message
        job = await fed.reach(uid, "Running")  # requeued and placed again
        assert job["placement"]["uid"] != placement


async def test_the_books_never_count_a_lost_share_and_new_work_on_the_same_gpus(
    database_url: str,
) -> None:
    """A job waits for room while the cluster's agent restarts: the restarted cluster reports
    its 64 GPUs free, but the Global lets go of the lost share before it can place anything
    there, so at no sampled moment do its books hold more GPUs than the cluster has (before,
    the waiting job was placed on the GPUs the lost share still held: 80 of 64)."""
    async with federation(database_url) as fed:
        east = SimulatedCluster.from_spec("east", SPEC)
        await fed.join("east", east)
        await fed.ready("east")
        started = await fed.submit(job_document("started", replicas=4, runningEstimate="10h"))
        await fed.reach(started, "Running")
        big = await fed.submit(job_document("big", replicas=6, runningEstimate="10h"))  # 48 GPUs
        await fed.reach(big, "Pending")

        await fed.leave("east")
        restarted = SimulatedCluster.from_spec("east", SPEC)
        await fed.join("east", restarted)
        samples: list[int] = []

        async def settled() -> bool:
            samples.append(await booked(fed, "east", [started, big]))
            states = {(await fed.job(uid))["state"] for uid in (started, big)}
            return states == {"Running", "Pending"} and "PodEvicted" in await fed.reasons(started)

        await eventually(settled)
        assert max(samples) <= 64, samples
        assert await booked(fed, "east", [started, big]) == busy({"east": restarted})
