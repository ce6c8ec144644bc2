"""The server's eviction step (`services.scheduling.evictions.evict`) on both databases: the
victim's placement ends and its share is cancelled through the outbox, the victim is requeued
through its Volcano policies keeping its attempt count, with an event naming the preemptor;
the preemptor's pending reason says what was evicted."""

from __future__ import annotations

import uuid

import httpx
from fastapi import FastAPI
from sqlalchemy import select, update

from tests.factories import create_cluster, job_document, submit
from tests.grpc_stream import Stream, snapshot
from volcano_global.db.engine import transaction
from volcano_global.db.models import (
    Event,
    Job,
    JobState,
    OutboxKind,
    OutboxMessage,
    Placement,
    PlacementState,
)
from volcano_global.services.scheduling.evictions import evict
from volcano_global.solver import JobDecision
from volcano_global.solver.model import RunningJob
from volcano_global.solver.preemption import PREEMPT, Eviction


async def test_a_victim_is_requeued_through_its_policies_with_an_event_naming_the_preemptor(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    token = str((await create_cluster(api, "gpu-east"))["agentToken"])
    stream = Stream(app, token)
    await stream.hello()
    assert (await stream.send(snapshot(1, nodes=8))).ack.seq == 1
    low = (await submit(api, job_document("low", replicas=1, gpus=1))).json()["uid"]
    assert len((await app.state.scheduler.run_once()).result.placed) == 1
    high_doc = job_document("high", replicas=1, gpus=1)
    high_doc["spec"]["priorityClassName"] = "system-cluster-critical"
    high = (await submit(api, high_doc)).json()["uid"]
    async with transaction(app.state.sessions) as session:
        await session.execute(
            update(Job).where(Job.id == uuid.UUID(low)).values(state=JobState.RUNNING, requeues=1)
        )
    victim = RunningJob(low, (("gpu-east", "H100", 1),), priority=0, name="ml/low")
    eviction = Eviction(high, (victim,), JobDecision(high, True), PREEMPT, "evicting ml/low")
    async with transaction(app.state.sessions) as session:
        outcomes = await evict(session, eviction)
    assert [(o.job, o.action) for o in outcomes] == [("ml/low", "Requeued")]
    async with transaction(app.state.sessions) as session:
        placement = (
            await session.execute(select(Placement).where(Placement.job_id == uuid.UUID(low)))
        ).scalar_one()
        cancels = (
            (
                await session.execute(
                    select(OutboxMessage).where(OutboxMessage.kind == OutboxKind.CANCEL)
                )
            )
            .scalars()
            .all()
        )
        events = (
            (await session.execute(select(Event).where(Event.job_id == uuid.UUID(low))))
            .scalars()
            .all()
        )
        jobs = {
            str(j.id): j
            for j in (
                await session.execute(
                    select(Job).where(Job.id.in_([uuid.UUID(low), uuid.UUID(high)]))
                )
            ).scalars()
        }
    assert placement.state is PlacementState.RELEASED
    assert len(cancels) == 1
    assert (jobs[low].state, jobs[low].requeues) == (JobState.PENDING, 2)  # attempt count kept
    assert any(
        e.message.startswith("Preempted by ml/high (priority 2000000000)") for e in events
    ), [e.message for e in events]
    assert jobs[high].pending_reason == "evicting ml/low"
