"""Agents' heartbeats written together (SQLite and Postgres): the heartbeats noted within the
delay are one transaction; a NotReady cluster heard again is Ready, with its event; a cluster
deleted meanwhile is left alone; a write the database refused is written by the next."""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime

from fastapi import FastAPI
from sqlalchemy import event, select

from volcano_global.db.engine import create_engine, create_session_factory, transaction
from volcano_global.db.models import Cluster, ClusterState, Event
from volcano_global.services.inventory.clusters import delete_cluster, register_cluster
from volcano_global.services.inventory.heartbeat_writer import HeartbeatWriter, delay_for


async def _register(app: FastAPI, *names: str) -> dict[str, uuid.UUID]:
    async with transaction(app.state.sessions) as session:
        clusters = [
            (await register_cluster(session, name=name, description="", labels={}))[0]
            for name in names
        ]
        for cluster in clusters:
            cluster.state = ClusterState.READY
        await session.flush()
        return {cluster.name: cluster.id for cluster in clusters}


async def _heard(app: FastAPI) -> dict[str, tuple[ClusterState, datetime | None]]:
    async with transaction(app.state.sessions) as session:
        rows = await session.execute(select(Cluster.name, Cluster.state, Cluster.last_heartbeat_at))
        return {name: (state, at) for name, state, at in rows}


def test_the_delay_is_a_small_part_of_the_timeout() -> None:
    assert delay_for(30) == 1.0
    assert delay_for(0.6) == 0.03


async def test_heartbeats_noted_within_the_delay_are_one_transaction(app: FastAPI) -> None:
    ids = await _register(app, "east", "west", "north")
    begun: list[object] = []

    def on_begin(connection: object) -> None:
        begun.append(connection)

    sync_engine = app.state.engine.sync_engine
    event.listen(sync_engine, "begin", on_begin)
    try:
        writer = HeartbeatWriter(app.state.sessions, delay_s=0.2)
        for name, cluster_id in ids.items():
            writer.note(cluster_id, name)
        writer.note(ids["east"], "east")  # heard twice: written once
        await asyncio.sleep(0.6)
    finally:
        event.remove(sync_engine, "begin", on_begin)
    heard = await _heard(app)
    assert all(at is not None for _, at in heard.values()), heard
    assert len(begun) == 1
    assert writer._flush is None  # nothing left to write: no timer runs


async def test_a_not_ready_cluster_heard_again_is_ready(app: FastAPI) -> None:
    ids = await _register(app, "east")
    async with transaction(app.state.sessions) as session:
        (await session.get(Cluster, ids["east"])).state = ClusterState.NOT_READY  # type: ignore[union-attr]
    writer = HeartbeatWriter(app.state.sessions, delay_s=60)
    writer.note(ids["east"], "east")
    await writer.close()  # writes what is noted now
    assert (await _heard(app))["east"][0] is ClusterState.READY
    async with transaction(app.state.sessions) as session:
        reasons = (await session.scalars(select(Event.reason))).all()
    assert "Ready" in reasons


async def test_a_cluster_deleted_or_registered_again_is_left_alone(app: FastAPI) -> None:
    ids = await _register(app, "east", "west")
    async with transaction(app.state.sessions) as session:
        await delete_cluster(session, name="east")
        await delete_cluster(session, name="west")
    again = await _register(app, "west")  # a new cluster under the old name
    writer = HeartbeatWriter(app.state.sessions, delay_s=60)
    writer.note(ids["east"], "east")
    writer.note(ids["west"], "west")
    await writer.close()
    heard = await _heard(app)
    assert list(heard) == ["west"] and heard["west"][1] is None, heard
    assert again["west"] != ids["west"]


async def test_a_refused_write_is_written_by_the_next(app: FastAPI) -> None:
    ids = await _register(app, "east")
    nowhere = create_engine("postgresql+asyncpg://postgres@127.0.0.1:1/nowhere")
    try:
        writer = HeartbeatWriter(create_session_factory(nowhere), delay_s=60)
        writer.note(ids["east"], "east")
        await writer.close()  # refused: kept
        assert (await _heard(app))["east"][1] is None
        writer.sessions = app.state.sessions
        await writer.close()
    finally:
        await nowhere.dispose()
    assert (await _heard(app))["east"][1] is not None
