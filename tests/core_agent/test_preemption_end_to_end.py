"""Preemption and reclaim end to end (a real server, real gRPC, simulated member clusters):
each rule of `solver/preemption.py` and the server's two steps (`services/scheduling/
evictions.py`): the victims are evicted and requeued through their policies with an event
naming the preemptor, the preemptor holds the freed capacity (Nominated) and starts only once
every victim's share is gone, never on GPUs a victim still holds."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from sqlalchemy import update

from core_agent.simulated.cluster import ClusterSpec, SimulatedCluster
from tests.core_agent.federation import Federation, federation
from tests.factories import (
    eventually,
    job_document,
    priority_class,
    split_annotations,
    volcano_queue,
)
from volcano_global.db.base import utcnow
from volcano_global.db.engine import transaction
from volcano_global.db.models import Job
from volcano_global.services.jobs.submission import NOT_YET_SCHEDULED

SPEC = ClusterSpec.model_validate(
    {
        "nodeGroups": [{"count": 4, "gpusPerNode": 8, "gpuModel": "H100"}],
        "topology": {"tiers": [{"name": "tor", "size": 4}]},
    }
)
# A victim must have run an hour; the tests age the jobs they mean to be old enough.
PREEMPTION = {"preemption": {"min_run_s": 3600, "start_timeout_s": 60}}


# Every job is expected to run 10 h (360 s at the clusters' time scale: past every test): a
# victim aged 2 h has 8 h left, so waiting for it would cost a preemptor of at least its size
# more than its eviction loses (solver/preemption.py, step 5).
def doc(name: str, nodes: int, priority_class: str, *, queue: str = "default") -> dict[str, Any]:
    document = job_document(name, queue=queue, replicas=nodes, runningEstimate="36000s")
    document["spec"]["priorityClassName"] = priority_class
    return document


async def age(fed: Federation, *uids: str, hours: float = 2.0) -> None:
    """Make running jobs look as if they started `hours` ago (past the minimum run time)."""
    async with transaction(fed.app.state.sessions) as session:
        await session.execute(
            update(Job)
            .where(Job.id.in_([uuid.UUID(u) for u in uids]))
            .values(started_at=utcnow() - timedelta(hours=hours))
        )


async def rounds_go_by(fed: Federation, *uids: str, rounds: int = 3) -> None:
    """Wait until `rounds` more rounds have committed (every one after the first began after
    the call, so saw the jobs as they are now), and check they considered each job."""
    registry = fed.app.state.metrics.registry

    def committed() -> float:
        sample = {"outcome": "committed"}
        return registry.get_sample_value("vglobal_scheduling_rounds_total", sample) or 0.0

    start = committed()
    await eventually(lambda: committed() >= start + rounds)
    for uid in uids:
        assert (await fed.job(uid))["pendingReason"] != NOT_YET_SCHEDULED, uid


async def has_event(fed: Federation, uid: str, reason: str) -> bool:
    events = (await fed.api.get(f"/api/v1/jobs/{uid}/events")).json()["items"]
    return any(e["reason"] == reason for e in events)


async def cluster(fed: Federation, name: str) -> SimulatedCluster:
    """A cluster of SPEC, joined and Ready."""
    sim = SimulatedCluster.from_spec(name, SPEC)
    sim.time_scale = 0.01  # a job of 36,000 s runs 360 s
    await fed.join(name, sim)
    await fed.ready(name)
    return sim


async def test_a_high_priority_gang_evicts_the_lowest_old_enough_preemptable_job(
    database_url: str,
) -> None:
    async with federation(database_url, scheduling=PREEMPTION) as fed:
        east = await cluster(fed, "east")
        # Four one-node jobs fill the cluster: one may not be preempted, one is too young,
        # one is of a higher priority than the other.
        keep = doc("keep", 1, "low-priority")
        keep["metadata"]["annotations"] = {"volcano.sh/preemptable": "false"}
        uids = {
            "keep": await fed.submit(keep),
            "young": await fed.submit(doc("young", 1, "low-priority")),
            "medium": await fed.submit(doc("medium", 1, "medium-priority")),
            "old": await fed.submit(doc("old", 1, "low-priority")),
        }
        for uid in uids.values():
            await fed.reach(uid, "Running")
        await age(fed, uids["keep"], uids["medium"], uids["old"])

        high = await fed.submit(doc("high", 1, "high-priority"))
        message = await fed.event(high, "Preempting")
        assert "ml/old (priority 100" in message and "1 job(s), 8 GPUs" in message, message
        evicted = await fed.event(uids["old"], "PodEvicted")
        assert evicted.startswith("Preempted by ml/high (priority 1000)"), evicted
        assert "requeued (retry 1/3)" in evicted
        job = await fed.reach(high, "Running")
        assert [(s["cluster"], s["pods"]) for s in job["placement"]["shares"]] == [("east", 1)]
        for name in ("keep", "young", "medium"):
            assert (await fed.job(uids[name]))["state"] == "Running", name
        victim = await fed.job(uids["old"])
        assert (victim["state"], victim["requeues"]) == ("Pending", 1)
        # Never more pods than GPUs: the preemptor's share came after the victim's was gone.
        assert sum(s.assignment.pods for s in east.shares.values()) == 4


async def test_a_split_preemptor_evicts_in_two_clusters_and_starts_when_both_are_gone(
    database_url: str,
) -> None:
    async with federation(database_url, scheduling=PREEMPTION) as fed:
        sims = {name: await cluster(fed, name) for name in ("east", "west")}
        await fed.link("east", "west")
        low = [await fed.submit(doc(f"low-{i}", 2, "low-priority")) for i in range(4)]
        for uid in low:
            await fed.reach(uid, "Running")
        await age(fed, *low)
        # 6 nodes in units of 2: more than a cluster holds, so a split over both.
        big = doc("big", 6, "high-priority")
        big["metadata"]["annotations"] = split_annotations(2, crossing_gbps=50, max_clusters=2)
        high = await fed.submit(big)
        message = await fed.event(high, "Preempting")
        assert "evicting 3 job(s), 48 GPUs" in message, message
        job = await fed.reach(high, "Running")
        assert sorted(s["pods"] for s in job["placement"]["shares"]) == [2, 4]
        states = [(await fed.job(uid))["state"] for uid in low]
        assert sorted(states) == ["Pending", "Pending", "Pending", "Running"]
        for sim in sims.values():  # never more pods than a cluster's nodes
            assert sum(s.assignment.pods for s in sim.shares.values()) == 4
        links = (await fed.api.get("/api/v1/links")).json()["items"]
        assert [x["reservedGbps"] for x in links] == [50]


async def test_a_class_that_never_preempts_waits_and_the_cap_holds_a_round_back(
    database_url: str,
) -> None:
    scheduling = {"preemption": {**PREEMPTION["preemption"], "max_jobs": 1}}
    async with federation(database_url, scheduling=scheduling) as fed:
        await cluster(fed, "east")
        created = await fed.api.post(
            "/api/v1/priorityclasses",
            json=priority_class("urgent-but-polite", 5000, preemptionPolicy="Never"),
        )
        assert created.status_code == 201, created.text
        low = [await fed.submit(doc(f"low-{i}", 1, "low-priority")) for i in range(4)]
        for uid in low:
            await fed.reach(uid, "Running")
        await age(fed, *low)
        polite = await fed.submit(doc("polite", 1, "urgent-but-polite"))
        # Two nodes at once: two victims, but the cap allows one per round.
        wide = await fed.submit(doc("wide", 2, "high-priority"))
        await rounds_go_by(fed, polite, wide)
        assert (await fed.job(polite))["state"] == "Pending"
        assert (await fed.job(wide))["state"] == "Pending"
        for uid in low:
            assert (await fed.job(uid))["state"] == "Running"
        assert not await has_event(fed, wide, "Preempting")
        assert not await has_event(fed, polite, "Preempting")


async def test_a_queue_below_its_deserved_share_reclaims_from_a_reclaimable_queue(
    database_url: str,
) -> None:
    async with federation(database_url, scheduling=PREEMPTION) as fed:
        await cluster(fed, "east")
        for name, reclaimable in (("research", False), ("prod", True)):
            made = await fed.api.post(
                "/api/v1/queues", json=volcano_queue(name, weight=1, reclaimable=reclaimable)
            )
            assert made.status_code == 201, made.text
        research = [
            await fed.submit(doc(f"r-{i}", 1, "low-priority", queue="research")) for i in range(4)
        ]
        for uid in research:
            await fed.reach(uid, "Running")
        await age(fed, *research)
        # prod deserves half the cluster and holds nothing, but research may not be reclaimed.
        first = await fed.submit(doc("p-0", 1, "low-priority", queue="prod"))
        await rounds_go_by(fed, first)
        assert (await fed.job(first))["state"] == "Pending"
        assert not await has_event(fed, first, "Reclaiming")
        changed = await fed.api.put(
            "/api/v1/queues/research", json=volcano_queue("research", weight=1, reclaimable=True)
        )
        assert changed.status_code == 200, changed.text
        message = await fed.event(first, "Reclaiming")
        assert "ml/r-" in message, message
        await fed.reach(first, "Running")
        evicted = [uid for uid in research if (await fed.job(uid))["state"] == "Pending"]
        assert len(evicted) == 1


async def test_a_job_that_just_saved_a_checkpoint_is_evicted_before_one_that_did_not(
    database_url: str,
) -> None:
    async with federation(database_url, scheduling=PREEMPTION) as fed:
        await cluster(fed, "east")
        older = await fed.submit(doc("older", 2, "low-priority"))
        await fed.reach(older, "Running")
        newer = await fed.submit(doc("newer", 2, "low-priority"))
        await fed.reach(newer, "Running")
        await age(fed, older, hours=3)
        await age(fed, newer, hours=2)
        # Without checkpoints the newer job loses less (2 h against 3 h); the older one has
        # just saved one, so evicting it loses almost nothing.
        saved = await fed.api.post(f"/api/v1/jobs/{older}/checkpoints", json={"step": 9000})
        assert saved.status_code == 200, saved.text
        high = await fed.submit(doc("high", 2, "high-priority"))
        message = await fed.event(high, "Preempting")
        assert "ml/older (priority 100" in message and "ml/newer" not in message, message
        assert "0.0 GPU-hours lost" in message, message
        await fed.reach(high, "Running")
        assert (await fed.job(newer))["state"] == "Running"
