"""The periodic outbox read of a process's quiet agent streams (SQLite and Postgres, real
loopback gRPC): one census for all of them says whether anything waits, and only a stream
for which something may wait reads its own; a message whose wake-up was lost still arrives."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest
from fastapi import FastAPI

from tests.conftest import app_settings
from tests.factories import create_cluster, job_document, submit
from tests.grpc_stream import Stream, open_streams, snapshot
from volcano_global.db.notifications import Channel
from volcano_global.services.lifecycle import outbox
from volcano_global.settings import Settings

POLL_S = 0.2
STREAMS = 6


@pytest.fixture
def settings(database_url: str) -> Settings:
    return app_settings(
        database_url, agents={"outbox_poll_s": POLL_S, "outbox_safety_poll_s": POLL_S}
    )


async def test_quiet_streams_share_one_census(
    app: FastAPI, api: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: each quiet stream read its outbox and its copies every poll period (6 streams
    over 2 s: about 60 reads of each). After: one census a period covers them all, and none
    reads its own while nothing waits for it."""
    streams = await open_streams(app, api, STREAMS)
    await asyncio.sleep(2 * POLL_S)  # past every stream's read as it opened
    own: list[uuid.UUID] = []
    census: list[int] = []
    single, shared = outbox.unacknowledged_ids, outbox.clusters_unacknowledged

    async def counted_single(session, *, cluster_id, limit):  # type: ignore[no-untyped-def]
        own.append(cluster_id)
        return await single(session, cluster_id=cluster_id, limit=limit)

    async def counted_shared(session, *, cluster_ids):  # type: ignore[no-untyped-def]
        census.append(len(cluster_ids))
        return await shared(session, cluster_ids=cluster_ids)

    monkeypatch.setattr(outbox, "unacknowledged_ids", counted_single)
    monkeypatch.setattr(outbox, "clusters_unacknowledged", counted_shared)
    await asyncio.sleep(10 * POLL_S)
    assert own == []
    assert 0 < len(census) <= 10 * 2 + 2, census
    assert max(census) == STREAMS
    for stream in streams:
        await stream.close()


async def test_a_message_whose_wake_up_was_lost_arrives_by_the_poll(
    app: FastAPI, api: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A placement committed without waking the stream (a notification lost with its
    connection) is found by the census and sent."""
    token = (await create_cluster(api, "gpu-east"))["agentToken"]
    stream = Stream(app, token)
    await stream.hello()
    assert (await stream.send(snapshot(1, nodes=1))).ack.seq == 1
    monkeypatch.setattr(Channel, "wrote", lambda self, session, keys: None)
    uid = (await submit(api, job_document("solo", replicas=1))).json()["uid"]
    report = await app.state.scheduler.run_once()
    assert report is not None and report.result.placed == [uid]
    reply = await asyncio.wait_for(stream.call.read(), timeout=30)
    assert reply.WhichOneof("body") == "assignment"
    assert reply.assignment.job_uid == uid
    await stream.close()
