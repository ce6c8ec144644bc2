"""A stream sends every dispatch message waiting for its cluster when woken, however many it
has sent that the agent has not reported on yet: the oldest unacknowledged messages do not
hold back the newer ones (they did: a stream read the oldest 100, and sent only those of them
it had not sent, so a cluster with 100 messages in flight got no more until reports came, and
then only at its next wake-up)."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select

from tests.conftest import app_settings
from tests.factories import REPLY_S, eventually, job_document, submit
from tests.grpc_stream import Stream, snapshot
from volcano_global.db.engine import transaction
from volcano_global.db.models import Cluster, OutboxKind, OutboxMessage, Placement
from volcano_global.grpc import agent_service
from volcano_global.rpc.shares import ShareCancellation
from volcano_global.rpc.v1 import agent_pb2 as pb
from volcano_global.services.lifecycle import outbox
from volcano_global.services.lifecycle.outbox import OUTBOX
from volcano_global.settings import Settings


@pytest.fixture
def settings(database_url: str) -> Settings:
    """Streams read their outbox only when woken (no poll within a test)."""
    return app_settings(database_url, agents={"outbox_poll_s": 600, "outbox_safety_poll_s": 600})


async def _write_cancellations(app: FastAPI, job: uuid.UUID, generations: range) -> list[str]:
    """One cancellation to gpu-east per placement of `job`, a placement per generation, in one
    commit that wakes the cluster's stream; the placements' ids in the order written."""
    written = []
    async with transaction(app.state.sessions) as session:
        cluster = (await session.execute(select(Cluster.id))).scalar_one()
        for generation in generations:
            placement = Placement(id=uuid.uuid4(), job_id=job, generation=generation)
            session.add(placement)
            await session.flush()
            cancellation = ShareCancellation(
                placement_id=str(placement.id), job_uid=str(job), reason="test"
            )
            session.add(
                OutboxMessage(
                    cluster_id=cluster,
                    placement_id=placement.id,
                    kind=OutboxKind.CANCEL,
                    payload=cancellation.to_payload(),
                )
            )
            await session.flush()  # created_at in the order written
            written.append(str(placement.id))
        OUTBOX.wrote(session, [cluster])
    return written


async def _read(stream: Stream, count: int) -> list[str]:
    """The placements of the next `count` cancellations the stream sends."""
    received = []
    while len(received) < count:
        reply = await asyncio.wait_for(stream.call.read(), timeout=REPLY_S)
        if reply.WhichOneof("body") == "cancellation":
            received.append(reply.cancellation.placement_id)
    return received


async def _connected(app: FastAPI, api: httpx.AsyncClient, east: str) -> tuple[Stream, uuid.UUID]:
    """gpu-east's agent stream, synced, and a job to write its messages about."""
    stream = Stream(app, east)
    await stream.hello()
    assert (await stream.send(snapshot(1, nodes=1))).ack.seq == 1
    if app.state.engine.dialect.name == "postgresql":
        # a listener wakes every stream once as it connects: not what is tested
        await eventually(lambda: OUTBOX.listening, within=10)
    return stream, uuid.UUID((await submit(api, job_document("train"))).json()["uid"])


async def test_a_stream_sends_every_waiting_message_though_none_was_reported_on(
    app: FastAPI, api: httpx.AsyncClient, east: str
) -> None:
    stream, job = await _connected(app, api, east)
    first = await _write_cancellations(app, job, range(1, 251))
    assert await _read(stream, 250) == first  # all of them, oldest first, none reported on
    # The next wake-up sends the new message alone: what was sent is not sent again.
    later = await _write_cancellations(app, job, range(251, 252))
    assert await _read(stream, 1) == later
    await stream.close()


async def test_a_stream_with_a_full_window_sends_more_once_reports_come(
    app: FastAPI, api: httpx.AsyncClient, east: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An agent that stops reporting gets at most a window of messages; acknowledgements wake
    # no stream, so the reports that make room must bring the rest.
    monkeypatch.setattr(agent_service, "OUTBOX_WINDOW", 5)
    stream, job = await _connected(app, api, east)
    written = await _write_cancellations(app, job, range(1, 9))
    assert await _read(stream, 5) == written[:5]
    async with transaction(app.state.sessions) as session:
        cluster = (await session.execute(select(Cluster.id))).scalar_one()
        placements = [uuid.UUID(p) for p in written[:5]]
        await outbox.acknowledge(
            session, delivered={(cluster, p, OutboxKind.CANCEL) for p in placements}
        )
    report = pb.JobStatusReport(
        placement_id=str(uuid.uuid4()), phase=pb.SHARE_PHASE_RUNNING, report_seq=1
    )
    await stream.call.write(pb.AgentMessage(job_status=report))
    assert await _read(stream, 3) == written[5:]
    await stream.close()
