"""The server's two preemption steps, driven message by message on both databases: the round
evicts the victim (cancelled through the outbox, requeued with an event naming the preemptor)
and nominates the preemptor, whose placement holds the freed GPUs against every other job but
is not dispatched; the preemptor starts only once its cluster acknowledged the victim's
cancellation *and* the inventory shows the victim's GPUs free."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta

import httpx
from fastapi import FastAPI
from sqlalchemy import select, update

from tests.factories import create_cluster, job_document, submit
from tests.grpc_stream import Stream, node
from volcano_global.db.base import utcnow
from volcano_global.db.engine import transaction
from volcano_global.db.models import (
    Cluster,
    Event,
    Job,
    JobState,
    OutboxKind,
    OutboxMessage,
    Placement,
    PlacementState,
)
from volcano_global.rpc.v1 import agent_pb2 as pb
from volcano_global.services.scheduling.free import free_capacity
from volcano_global.services.scheduling.timing import running_jobs
from volcano_global.services.tenancy.queue_shares import current_shares
from volcano_global.solver.durations import DurationModel


def inventory(seq: int, used: int, *, free_nodes: int = 0) -> pb.AgentMessage:
    """Node n0 with `used` GPUs in use, and `free_nodes` more nodes with none."""
    return pb.AgentMessage(
        snapshot=pb.InventorySnapshot(
            seq=seq,
            domains=[
                pb.Domain(name="spine", tier=2),
                pb.Domain(name="tor0", tier=1, parent="spine"),
            ],
            nodes=[node("n0", used=used), *(node(f"n{i}") for i in range(1, free_nodes + 1))],
        )
    )


async def rows(app: FastAPI, model: type, *where: object) -> list:
    async with transaction(app.state.sessions) as session:
        return list((await session.execute(select(model).where(*where))).scalars())


def victim_document() -> dict:
    """A low-priority one-node job expected to run 10 h: aged 2 h it has 8 h left, so waiting
    for it would cost the one-node preemptor 64 GPU-hours, more than the 16 its eviction loses
    (solver/preemption.py, step 5)."""
    return job_document(
        "low", replicas=1, priorityClassName="low-priority", runningEstimate="36000s"
    )


async def running_victim(app: FastAPI, api: httpx.AsyncClient) -> tuple[Stream, uuid.UUID]:
    """One node, and the victim running on it (its pods use the node) past the minimum run
    time; returns the cluster's stream and the victim's id."""
    stream = Stream(app, str((await create_cluster(api, "gpu-east"))["agentToken"]))
    await stream.hello()
    await stream.reply(inventory(1, used=0), "ack")
    low_id = uuid.UUID((await submit(api, victim_document())).json()["uid"])
    assert len((await app.state.scheduler.run_once()).result.placed) == 1
    await stream.reply(inventory(2, used=8), "ack")
    async with transaction(app.state.sessions) as session:
        await session.execute(
            update(Job)
            .where(Job.id == low_id)
            .values(state=JobState.RUNNING, started_at=utcnow() - timedelta(hours=2))
        )
    return stream, low_id


async def nominated_preemptor(app: FastAPI, api: httpx.AsyncClient) -> uuid.UUID:
    """A high-priority one-node job, nominated by the next round over the running victim."""
    high = await submit(api, job_document("high", replicas=1, priorityClassName="high-priority"))
    high_id = uuid.UUID(high.json()["uid"])
    assert (await app.state.scheduler.run_once()).result.nominated == [str(high_id)]
    return high_id


async def test_the_preemptor_holds_the_victims_gpus_and_starts_once_they_are_gone(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    scheduler = app.state.scheduler
    stream, low_id = await running_victim(app, api)
    [victim_placement] = await rows(app, Placement, Placement.job_id == low_id)

    high = await submit(api, job_document("high", replicas=1, priorityClassName="high-priority"))
    high_id = uuid.UUID(high.json()["uid"])
    report = await scheduler.run_once()
    assert report.result.nominated == [str(high_id)]
    assert [(o.job, o.action) for o in report.result.evicted] == [("ml/low", "Requeued")]
    [nominated] = await rows(app, Placement, Placement.job_id == high_id)
    assert nominated.state is PlacementState.NOMINATED
    assert nominated.awaits == [str(victim_placement.id)]
    [cancel] = await rows(app, OutboxMessage, OutboxMessage.kind == OutboxKind.CANCEL)
    assert cancel.placement_id == victim_placement.id and cancel.acked_at is None
    assert not await rows(app, OutboxMessage, OutboxMessage.placement_id == nominated.id)
    [victim] = await rows(app, Job, Job.id == low_id)
    assert (victim.state, victim.requeues) == (JobState.PENDING, 1)
    events = await rows(app, Event, Event.job_id == low_id, Event.reason == "PodEvicted")
    assert events[0].message.startswith("Preempted by ml/high (priority 1000)")

    # Another job fits the node the victim leaves, but the nomination holds it.
    other = await submit(api, job_document("other", replicas=1, priorityClassName="high-priority"))
    report = await scheduler.run_once()
    assert report is not None and not report.result.placed

    async def state_of_high() -> tuple[JobState, str | None]:
        [job] = await rows(app, Job, Job.id == high_id)
        return job.state, job.pending_reason

    await scheduler.supervise()  # cancellation not acknowledged yet
    state, why = await state_of_high()
    assert state is JobState.PENDING
    assert why == "preempting: waiting for the evicted jobs' shares to be removed in gpu-east"

    # The agent removed the victim's share; its pods still hold the node.
    ack = pb.JobStatusReport(
        placement_id=str(victim_placement.id),
        job_uid=str(low_id),
        phase=pb.SHARE_PHASE_CANCELLED,
        report_seq=1,
    )
    reply = await stream.reply(pb.AgentMessage(job_status=ack), "report_ack")
    assert reply.report_ack.report_seq == 1
    await scheduler.supervise()
    state, why = await state_of_high()
    assert state is JobState.PENDING
    assert why is not None and "are not free yet (the evicted pods are terminating)" in why

    await stream.reply(inventory(3, used=0), "ack")  # the pods are gone
    # The node is free now, and a round would give it to `other` but for the nomination.
    report = await scheduler.run_once()
    assert report is None or not report.result.placed
    await scheduler.supervise()
    state, _ = await state_of_high()
    assert state is JobState.PLACED
    [started] = await rows(app, Placement, Placement.job_id == high_id)
    assert started.state is PlacementState.ACTIVE
    [assign] = await rows(app, OutboxMessage, OutboxMessage.placement_id == started.id)
    assert assign.kind is OutboxKind.ASSIGN
    [waiting] = await rows(app, Job, Job.id == uuid.UUID(other.json()["uid"]))
    assert waiting.state is JobState.PENDING
    await stream.close()


async def test_a_nomination_not_started_in_time_is_withdrawn(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    scheduler = app.state.scheduler
    stream, _ = await running_victim(app, api)
    high_id = await nominated_preemptor(app, api)
    # Nobody acknowledges the cancellation: past the timeout the hold is given up.
    async with transaction(app.state.sessions) as session:
        await session.execute(
            update(Placement)
            .where(Placement.job_id == high_id)
            .values(created_at=utcnow() - timedelta(hours=1))
        )
    await scheduler.supervise()
    [placement] = await rows(app, Placement, Placement.job_id == high_id)
    assert placement.state is PlacementState.WITHDRAWN
    [job] = await rows(app, Job, Job.id == high_id)
    assert job.state is JobState.PENDING
    assert job.pending_reason is not None and job.pending_reason.startswith(
        "not started within 600 s: waiting for the evicted jobs' shares to be removed"
    )
    assert await rows(app, Event, Event.job_id == high_id, Event.reason == "NominationWithdrawn")
    await stream.close()


async def test_cancelling_a_nominated_preemptor_withdraws_it_and_sends_nothing(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    scheduler = app.state.scheduler
    stream, _ = await running_victim(app, api)
    high_id = await nominated_preemptor(app, api)
    cancelled = await api.post(f"/api/v1/jobs/{high_id}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["state"] == "Cancelled"
    [placement] = await rows(app, Placement, Placement.job_id == high_id)
    assert placement.state is PlacementState.WITHDRAWN
    assert not await rows(app, OutboxMessage, OutboxMessage.placement_id == placement.id)
    await scheduler.supervise()  # nothing left to start
    [placement] = await rows(app, Placement, Placement.job_id == high_id)
    assert placement.state is PlacementState.WITHDRAWN
    await stream.close()


async def test_a_nominated_preemptor_counts_once_in_its_queue_held_not_also_waiting(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    """Fair share divides the fleet by what each queue holds plus what it waits for: the
    nomination's GPUs are held, so the preemptor is not also waiting."""
    stream, _ = await running_victim(app, api)
    await nominated_preemptor(app, api)
    queue = (await api.get("/api/v1/queues/default")).json()
    # The nominated preemptor holds 8 GPUs; the requeued victim waits for 8.
    assert queue["allocatedGpus"] == 8
    assert (queue["usage"]["pendingJobs"], queue["usage"]["pendingGpus"]) == (2, 8)
    async with transaction(app.state.sessions) as session:
        assert (await current_shares(session))["default"].wanted == 16
    await stream.close()


async def job_token(app: FastAPI, placement_id: uuid.UUID) -> str:
    """The job token the placement's assignment carries to its pods (one per placement)."""
    [assign] = await rows(
        app,
        OutboxMessage,
        OutboxMessage.placement_id == placement_id,
        OutboxMessage.kind == OutboxKind.ASSIGN,
    )
    return str(assign.payload["job_token"])


async def lost_s(app: FastAPI, job_id: uuid.UUID) -> float:
    """The seconds of work preemption counts as lost if the running job were evicted now."""
    async with transaction(app.state.sessions) as session:
        clusters = list((await session.execute(select(Cluster))).scalars())
        run = await running_jobs(
            session,
            clusters,
            await free_capacity(session, clusters),
            now=utcnow(),
            durations=DurationModel(),
        )
    [found] = [r for r in run if r.id == str(job_id)]
    return found.lost_s


async def test_the_evicted_runs_job_token_is_revoked_and_only_the_next_runs_checkpoint_counts(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    """The evicted run's pods may try to save a checkpoint while they terminate: their job
    token was revoked with their placement (401), so nothing of theirs counts for the next
    run, placed while they may still be going; the next run's own token reports."""
    scheduler = app.state.scheduler
    stream, low_id = await running_victim(app, api)

    async def checkpoint(placement: Placement, step: int) -> httpx.Response:
        token = await job_token(app, placement.id)
        return await api.post(
            f"/api/v1/jobs/{low_id}/checkpoints",
            json={"step": step},
            headers={"Authorization": f"Bearer {token}"},
        )

    [first_run] = await rows(app, Placement, Placement.job_id == low_id)
    await nominated_preemptor(app, api)
    waiting = await checkpoint(first_run, 400)
    assert waiting.status_code == 401, waiting.text
    # Two more nodes: the nomination holds one (its victim's pods still use n0), the requeued
    # victim is placed on the other and runs for an hour.
    await stream.reply(inventory(3, used=8, free_nodes=2), "ack")
    assert (await scheduler.run_once()).result.placed == [str(low_id)]
    [second_run] = await rows(
        app, Placement, Placement.job_id == low_id, Placement.state == PlacementState.ACTIVE
    )
    started = utcnow() - timedelta(hours=1)
    async with transaction(app.state.sessions) as session:
        await session.execute(
            update(Job).where(Job.id == low_id).values(state=JobState.RUNNING, started_at=started)
        )
    assert await lost_s(app, low_id) >= 3600  # the whole hour of this run

    late = await checkpoint(first_run, 500)
    assert late.status_code == 401, late.text
    assert await lost_s(app, low_id) >= 3600
    assert (await api.get(f"/api/v1/jobs/{low_id}")).json()["checkpoint"] is None
    saved = await checkpoint(second_run, 300)
    assert saved.status_code == 200, saved.text
    assert await lost_s(app, low_id) < 60
    await stream.close()


async def test_a_preemptor_held_back_by_the_minimum_run_says_whom_it_will_evict_and_when(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    """The victim has run 100 s of the 600 s minimum: the round evicts nothing yet, and the
    high-priority job's reason names the victim and the time left (not only "no room")."""
    _, low_id = await running_victim(app, api)
    async with transaction(app.state.sessions) as session:
        await session.execute(
            update(Job).where(Job.id == low_id).values(started_at=utcnow() - timedelta(seconds=100))
        )
    high = await submit(api, job_document("high", replicas=1, priorityClassName="high-priority"))
    report = await app.state.scheduler.run_once()
    assert report is not None and report.result.nominated == []
    job = (await api.get(f"/api/v1/jobs/{high.json()['uid']}")).json()
    assert job["state"] == "Pending"
    assert re.search(
        r"will preempt \S+/low once it has run 600 s: in about (4\d\d|500) s", job["pendingReason"]
    )
