"""A silent agent stream waits on what wakes it, not on a tick (SQLite and Postgres, real
loopback gRPC): with every period at a minute, a change of the stream's standing ends it at
once, and a dispatch message reaches it at once."""

from __future__ import annotations

import asyncio
import time

import grpc
import httpx
import pytest
from fastapi import FastAPI

from tests.conftest import app_settings
from tests.factories import create_cluster
from tests.grpc_stream import Stream
from volcano_global.settings import Settings

LONG_S = 60.0


@pytest.fixture
def settings(database_url: str) -> Settings:
    periods = ("stream_check_s", "outbox_poll_s", "outbox_safety_poll_s")
    return app_settings(database_url, agents=dict.fromkeys(periods, LONG_S))


async def test_a_rotated_token_ends_a_silent_stream_at_once(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    """Before: the stream noticed the wake-up of its standing only at its next tick (the
    outbox's poll period, a minute here). After: the wake-up itself ends its wait."""
    token = (await create_cluster(api, "east"))["agentToken"]
    stream = Stream(app, token)
    await stream.hello(cluster="east")
    await asyncio.sleep(0.5)  # the stream is waiting, silent
    started = time.monotonic()
    assert (await api.post("/api/v1/clusters/east/token")).status_code in (200, 201)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        while True:
            await asyncio.wait_for(stream.call.read(), timeout=10)
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert time.monotonic() - started < 5
    await stream.close()
