"""Streams read the outbox at once after a commit wrote messages for their cluster: a commit in
this process wakes them (never a rollback, only the clusters written for); on Postgres the
commit also notifies every other process, whose listener wakes its streams."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest
from fastapi import FastAPI
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.conftest import _asyncpg_dsn
from tests.factories import eventually
from volcano_global.db.engine import create_engine, create_session_factory
from volcano_global.db.models import ClusterShare, Placement
from volcano_global.db.notifications import Listener
from volcano_global.services.lifecycle import outbox
from volcano_global.services.lifecycle.outbox import OUTBOX


def _placement(*clusters: uuid.UUID) -> Placement:
    shares = [ClusterShare(cluster_id=c, pods=1, gpus=0, units=1) for c in clusters]
    return Placement(id=uuid.uuid4(), shares=shares)


async def test_a_commit_wakes_the_streams_of_the_clusters_it_wrote_for(app: FastAPI) -> None:
    if app.state.engine.dialect.name == "postgresql":
        await eventually(
            lambda: OUTBOX.listening, within=10
        )  # it wakes every stream as it connects
    east, west = uuid.uuid4(), uuid.uuid4()
    with OUTBOX.watch(east) as east_woken, OUTBOX.watch(west) as west_woken:
        async with app.state.sessions() as session:
            await outbox.enqueue_cancellations(session, placement=_placement(east), reason="t")
            await session.rollback()
        async with app.state.sessions() as session:
            await session.commit()  # a commit that wrote nothing for anyone
        assert not east_woken.is_set()
        assert not west_woken.is_set()
        async with app.state.sessions() as session:
            # Not committed to the database (no such placement): the signal only is tested.
            OUTBOX.wrote(session, [east])
            assert not east_woken.is_set()  # not before the commit
            await session.commit()
        assert east_woken.is_set()
        assert not west_woken.is_set()


@pytest.fixture
async def engine(postgres_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(postgres_url)
    yield engine
    await engine.dispose()


async def test_a_commit_notifies_other_processes_and_a_rollback_does_not(
    engine: AsyncEngine, postgres_url: str
) -> None:
    sessions = create_session_factory(engine)
    received: asyncio.Queue[str] = asyncio.Queue()
    other = await asyncpg.connect(_asyncpg_dsn(postgres_url))
    try:
        await other.add_listener(
            OUTBOX.name, lambda _c, _p, _ch, payload: received.put_nowait(payload)
        )
        east, west = uuid.uuid4(), uuid.uuid4()
        async with sessions() as session:
            OUTBOX.wrote(session, [west])
            await session.execute(text("SELECT 1"))  # a transaction is open
            await session.rollback()
        async with sessions() as session:
            OUTBOX.wrote(session, [east, west])
            await session.commit()
        marker = uuid.uuid4()
        async with sessions() as session:
            OUTBOX.wrote(session, [marker])
            await session.commit()
        got = [await asyncio.wait_for(received.get(), timeout=5)]
        while got[-1] != str(marker):
            got.append(await asyncio.wait_for(received.get(), timeout=5))
        # Notifications come in commit order: one of the rolled-back transaction would have
        # come before the marker's.
        assert sorted(got[:-1]) == sorted([str(east), str(west)])
    finally:
        await other.close()


async def test_the_listener_wakes_a_cluster_s_streams_and_all_of_them_after_an_outage(
    engine: AsyncEngine, postgres_url: str
) -> None:
    """A notification from another process wakes the streams of its cluster only; when the
    listening connection is killed the streams fall back to polling, and when it is back every
    stream is woken (notifications sent meanwhile were lost)."""
    listener = asyncio.create_task(Listener(engine, OUTBOX).listen())
    other = await asyncpg.connect(_asyncpg_dsn(postgres_url))
    east, west = uuid.uuid4(), uuid.uuid4()
    try:
        with OUTBOX.watch(east) as east_woken, OUTBOX.watch(west) as west_woken:
            await eventually(lambda: OUTBOX.listening, within=10)
            east_woken.clear()
            west_woken.clear()  # woken as the listener connected
            await other.execute(f"NOTIFY {OUTBOX.name}, '{east}'")
            await asyncio.wait_for(east_woken.wait(), timeout=5)
            assert not west_woken.is_set()
            await other.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                f"WHERE query LIKE 'LISTEN%{OUTBOX.name}%'"
            )
            await asyncio.wait_for(listener, timeout=15)  # it returns: the caller restarts it
            assert not OUTBOX.listening
            east_woken.clear()
            listener = asyncio.create_task(Listener(engine, OUTBOX).listen())
            await asyncio.wait_for(asyncio.gather(east_woken.wait(), west_woken.wait()), 10)
            assert OUTBOX.listening
    finally:
        listener.cancel()
        await asyncio.gather(listener, return_exceptions=True)
        await other.close()
