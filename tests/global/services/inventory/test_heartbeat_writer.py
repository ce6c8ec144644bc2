"""Agents' heartbeats written together (SQLite and Postgres): the heartbeats noted within the
delay are one transaction; a NotReady cluster heard again is Ready, with its event; a cluster
deleted meanwhile is left alone; a write the database refused is written by the next; the
server's stop waits for a write under way; a stale heartbeat changes nothing; a row another
transaction holds is written next time, without holding the others (Postgres)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from fastapi import FastAPI
from sqlalchemy import event, select

from tests.heartbeat_support import heard, register_ready
from volcano_global.db.base import utcnow
from volcano_global.db.engine import create_engine, create_session_factory, transaction
from volcano_global.db.models import Cluster, ClusterState, Event
from volcano_global.services.inventory import heartbeat_writer
from volcano_global.services.inventory.clusters import delete_cluster
from volcano_global.services.inventory.heartbeat_writer import HeartbeatWriter, delay_for


def test_the_delay_is_a_small_part_of_the_timeout() -> None:
    assert delay_for(30) == 1.0
    assert delay_for(0.6) == 0.03


async def test_heartbeats_noted_within_the_delay_are_one_transaction(app: FastAPI) -> None:
    ids = await register_ready(app, "east", "west", "north")
    begun: list[object] = []

    def on_begin(connection: object) -> None:
        begun.append(connection)

    sync_engine = app.state.engine.sync_engine
    event.listen(sync_engine, "begin", on_begin)
    try:
        writer = HeartbeatWriter(app.state.sessions, delay_s=0.2, stale_s=30)
        for name, cluster_id in ids.items():
            writer.note(cluster_id, name)
        writer.note(ids["east"], "east")  # heard twice: written once
        await asyncio.sleep(0.6)
    finally:
        event.remove(sync_engine, "begin", on_begin)
    seen = await heard(app)
    assert all(at is not None for _, at in seen.values()), seen
    assert len(begun) == 1
    assert writer._flush is None  # nothing left to write: no timer runs


async def test_a_not_ready_cluster_heard_again_is_ready(app: FastAPI) -> None:
    ids = await register_ready(app, "east")
    async with transaction(app.state.sessions) as session:
        (await session.get(Cluster, ids["east"])).state = ClusterState.NOT_READY  # type: ignore[union-attr]
    writer = HeartbeatWriter(app.state.sessions, delay_s=60, stale_s=30)
    writer.note(ids["east"], "east")
    await writer.close()  # writes what is noted now
    assert (await heard(app))["east"][0] is ClusterState.READY
    async with transaction(app.state.sessions) as session:
        reasons = (await session.scalars(select(Event.reason))).all()
    assert "Ready" in reasons


async def test_a_cluster_deleted_or_registered_again_is_left_alone(app: FastAPI) -> None:
    ids = await register_ready(app, "east", "west")
    async with transaction(app.state.sessions) as session:
        await delete_cluster(session, name="east")
        await delete_cluster(session, name="west")
    again = await register_ready(app, "west")  # a new cluster under the old name
    writer = HeartbeatWriter(app.state.sessions, delay_s=60, stale_s=30)
    writer.note(ids["east"], "east")
    writer.note(ids["west"], "west")
    await writer.close()
    seen = await heard(app)
    assert list(seen) == ["west"] and seen["west"][1] is None, seen
    assert again["west"] != ids["west"]


async def test_a_refused_write_is_written_by_the_next(app: FastAPI) -> None:
    ids = await register_ready(app, "east")
    nowhere = create_engine("postgresql+asyncpg://postgres@127.0.0.1:1/nowhere")
    try:
        writer = HeartbeatWriter(create_session_factory(nowhere), delay_s=60, stale_s=30)
        writer.note(ids["east"], "east")
        await writer.close()  # refused: kept
        assert (await heard(app))["east"][1] is None
        writer.sessions = app.state.sessions
        await writer.close()
    finally:
        await nowhere.dispose()
    assert (await heard(app))["east"][1] is not None


async def test_the_stop_waits_for_a_write_under_way(
    app: FastAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: closing cancelled the write in its transaction and lost its heartbeats."""
    ids = await register_ready(app, "east")
    record = heartbeat_writer.record_heartbeats

    async def slow(session, noted):  # type: ignore[no-untyped-def]
        await asyncio.sleep(0.5)
        return await record(session, noted)

    monkeypatch.setattr(heartbeat_writer, "record_heartbeats", slow)
    writer = HeartbeatWriter(app.state.sessions, delay_s=0.05, stale_s=30)
    writer.note(ids["east"], "east")
    await asyncio.sleep(0.2)  # the write is under way
    await writer.close()
    assert (await heard(app))["east"][1] is not None
    writer.note(ids["east"], "east")  # after the stop: nothing starts
    assert writer._flush is None


async def test_a_stale_or_older_heartbeat_changes_nothing(app: FastAPI) -> None:
    ids = await register_ready(app, "east", "west")
    later = utcnow() + timedelta(hours=1)
    async with transaction(app.state.sessions) as session:
        (await session.get(Cluster, ids["west"])).last_heartbeat_at = later  # type: ignore[union-attr]
    stale = HeartbeatWriter(app.state.sessions, delay_s=60, stale_s=0.1)
    stale.note(ids["east"], "east")
    await asyncio.sleep(0.3)  # older than stale_s when written: its silence was judged
    await stale.close()
    older = HeartbeatWriter(app.state.sessions, delay_s=60, stale_s=30)
    older.note(ids["west"], "west")  # the stored heartbeat is newer (another replica's)
    await older.close()
    seen = await heard(app)
    assert seen["east"][1] is None
    assert seen["west"][1] == later
