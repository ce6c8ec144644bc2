"""The periodic checks of a process's open agent streams share one read of their standing
(SQLite and Postgres, real loopback gRPC)."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.exc import OperationalError

from tests.conftest import app_settings
from tests.grpc_stream import open_streams
from volcano_global.services.inventory import agent_streams
from volcano_global.settings import Settings

CHECK_S = 0.4
STREAMS = 8


@pytest.fixture
def settings(database_url: str) -> Settings:
    return app_settings(database_url, agents={"stream_check_s": CHECK_S, "outbox_poll_s": 0.05})


async def test_open_streams_share_one_read_of_their_standing(
    app: FastAPI, api: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: each stream read its own standing every period (8 streams over 2 s: about 40
    reads). After: a read covers every open stream, about one each half period."""
    reads: list[int] = []  # the streams each read covered
    shared, single = agent_streams.lost_standings, agent_streams.lost_standing

    async def counted_shared(session, claims):  # type: ignore[no-untyped-def]
        reads.append(len(claims))
        return await shared(session, claims)

    async def counted_single(session, claim):  # type: ignore[no-untyped-def]
        reads.append(1)
        return await single(session, claim)

    streams = await open_streams(app, api, STREAMS)
    # Each stream's claim wakes it to read its own standing once (in process, and on Postgres
    # again by the NOTIFY echo): counted are the periodic checks after those.
    await asyncio.sleep(2 * CHECK_S)
    monkeypatch.setattr(agent_streams, "lost_standings", counted_shared)
    monkeypatch.setattr(agent_streams, "lost_standing", counted_single)
    await asyncio.sleep(5 * CHECK_S)
    assert 0 < len(reads) <= 5 * 2 + 2, reads
    assert max(reads) == STREAMS
    for stream in streams:
        await stream.close()


async def test_a_failed_shared_read_ends_no_stream(
    app: FastAPI, api: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One read serves every open stream: when it fails (a connection reset), the streams stay
    open and read again, instead of all ending and every agent reconnecting at once."""
    streams = await open_streams(app, api, 3)
    shared = agent_streams.lost_standings
    failures: list[int] = []

    async def failing(session, claims):  # type: ignore[no-untyped-def]
        failures.append(len(claims))
        raise OperationalError("SELECT", {}, ConnectionResetError("connection reset"))

    monkeypatch.setattr(agent_streams, "lost_standings", failing)
    await asyncio.sleep(4 * CHECK_S)
    assert failures  # the periodic checks did read, and failed
    monkeypatch.setattr(agent_streams, "lost_standings", shared)
    await asyncio.sleep(2 * CHECK_S)
    assert not any(stream.call.done() for stream in streams)
    for stream in streams:
        await stream.close()
