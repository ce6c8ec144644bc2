"""A placement committed while an agent's stream is quiet reaches the agent at once, not at the
stream's next poll (both poll periods here are a minute): the commit wakes the stream."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from fastapi import FastAPI

from tests.conftest import app_settings
from tests.factories import create_cluster, eventually, job_document, submit
from tests.grpc_stream import Stream, snapshot
from volcano_global.services.lifecycle.outbox import OUTBOX
from volcano_global.settings import Settings


@pytest.fixture
def settings(database_url: str) -> Settings:
    return app_settings(database_url, agents={"outbox_poll_s": 60, "outbox_safety_poll_s": 60})


async def test_a_placement_reaches_a_quiet_stream_at_once(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    token = (await create_cluster(api, "gpu-east"))["agentToken"]
    stream = Stream(app, token)
    await stream.hello()
    assert (await stream.send(snapshot(1, nodes=1))).ack.seq == 1
    if app.state.engine.dialect.name == "postgresql":
        # a listener wakes every stream once as it connects: not what is tested
        await eventually(lambda: OUTBOX.listening)
    uid = (await submit(api, job_document("solo", replicas=1))).json()["uid"]
    await asyncio.sleep(0.5)  # the stream is idle, waiting on its next message or poll
    report = await app.state.scheduler.run_once()
    assert report is not None
    assert report.result.placed == [uid]
    # Bounded well below the 60 s polls: the commit's wake-up brought it, not a poll.
    reply = await asyncio.wait_for(stream.call.read(), timeout=30)
    assert reply.WhichOneof("body") == "assignment"
    assert reply.assignment.job_uid == uid
    await stream.close()
