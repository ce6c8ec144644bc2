"""Agent silence (SQLite and Postgres): a cluster becomes NotReady only after a timeout's worth
of silence during which this replica was listening; a replica that just started, or that could
not reach its database, first gives every agent a full timeout."""

from __future__ import annotations

from datetime import timedelta

import pytest
from fastapi import FastAPI
from sqlalchemy import select

from volcano_global.db.base import utcnow
from volcano_global.db.engine import create_engine, create_session_factory, transaction
from volcano_global.db.models import Cluster, ClusterState
from volcano_global.services.inventory.clusters import register_cluster
from volcano_global.services.inventory.heartbeats import HeartbeatMonitor, mark_unresponsive


async def _ready_cluster(app: FastAPI, *, silent_for_s: float) -> None:
    async with transaction(app.state.sessions) as session:
        cluster, _ = await register_cluster(session, name="east", description="", labels={})
        cluster.state = ClusterState.READY
        cluster.last_heartbeat_at = utcnow() - timedelta(seconds=silent_for_s)


async def _state(app: FastAPI) -> ClusterState:
    async with transaction(app.state.sessions) as session:
        return (await session.execute(select(Cluster.state))).scalar_one()


async def test_silence_counts_only_while_listening(app: FastAPI) -> None:
    await _ready_cluster(app, silent_for_s=60)
    now = utcnow()
    async with transaction(app.state.sessions) as session:
        just_started = now - timedelta(seconds=10)
        assert await mark_unresponsive(session, timeout_s=30, listening_since=just_started) == []
    assert await _state(app) is ClusterState.READY
    async with transaction(app.state.sessions) as session:
        listening = now - timedelta(seconds=31)
        assert await mark_unresponsive(session, timeout_s=30, listening_since=listening) == ["east"]
    assert await _state(app) is ClusterState.NOT_READY


async def test_a_recent_heartbeat_keeps_a_cluster_ready(app: FastAPI) -> None:
    await _ready_cluster(app, silent_for_s=5)
    async with transaction(app.state.sessions) as session:
        long_ago = utcnow() - timedelta(hours=1)
        assert await mark_unresponsive(session, timeout_s=30, listening_since=long_ago) == []
    assert await _state(app) is ClusterState.READY


async def test_a_monitor_that_cannot_reach_its_database_starts_listening_over() -> None:
    engine = create_engine("postgresql+asyncpg://postgres@127.0.0.1:1/nowhere")
    try:
        monitor = HeartbeatMonitor(create_session_factory(engine), timeout_s=30)
        monitor.listening_since = utcnow() - timedelta(hours=1)
        with pytest.raises(OSError):
            await monitor.check()
        assert utcnow() - monitor.listening_since < timedelta(seconds=5)
    finally:
        await engine.dispose()
