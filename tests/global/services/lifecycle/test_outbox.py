"""Streams read the outbox at once after a commit wrote messages for their cluster: a commit in
this process wakes them (never a rollback, only the clusters written for); on Postgres the
commit also notifies every other process, whose listener wakes its streams."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import bindparam, select, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.conftest import _asyncpg_dsn
from tests.factories import REPLY_S, create_cluster, eventually, job_document, submit
from volcano_global.db.engine import create_engine, create_session_factory, transaction
from volcano_global.db.models import Cluster, ClusterShare, OutboxKind, OutboxMessage, Placement
from volcano_global.db.notifications import Listener
from volcano_global.services.lifecycle import outbox
from volcano_global.services.lifecycle.outbox import OUTBOX


def _placement(*clusters: uuid.UUID) -> Placement:
    shares = [ClusterShare(cluster_id=c, pods=1, gpus=0, units=1) for c in clusters]
    return Placement(id=uuid.uuid4(), shares=shares)


async def test_a_commit_wakes_the_streams_of_the_clusters_it_wrote_for(app: FastAPI) -> None:
    if app.state.engine.dialect.name == "postgresql":
        await eventually(lambda: OUTBOX.listening)  # it wakes every stream as it connects
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
        got = [await asyncio.wait_for(received.get(), timeout=REPLY_S)]
        while got[-1] != str(marker):
            got.append(await asyncio.wait_for(received.get(), timeout=REPLY_S))
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
            await eventually(lambda: OUTBOX.listening)
            east_woken.clear()
            west_woken.clear()  # woken as the listener connected
            await other.execute(f"NOTIFY {OUTBOX.name}, '{east}'")
            await asyncio.wait_for(east_woken.wait(), timeout=REPLY_S)
            assert not west_woken.is_set()
            await other.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                f"WHERE query LIKE 'LISTEN%{OUTBOX.name}%'"
            )
            await asyncio.wait_for(listener, timeout=15)  # it returns: the caller restarts it
            assert not OUTBOX.listening
            east_woken.clear()
            listener = asyncio.create_task(Listener(engine, OUTBOX).listen())
            await asyncio.wait_for(asyncio.gather(east_woken.wait(), west_woken.wait()), REPLY_S)
            assert OUTBOX.listening
    finally:
        listener.cancel()
        await asyncio.gather(listener, return_exceptions=True)
        await other.close()


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)  # row locks
async def test_acknowledging_locks_the_messages_in_id_order(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    """Two replicas acknowledging overlapping messages (a stream taken over while the old one
    finishes its batch) must lock them in one order, or each may hold a row the other waits
    for. The rows here lie in the table, and in both of its indexes that could serve the
    statement, in the order opposite to their ids; another transaction holds the later id. The
    acknowledgement must have locked the earlier id before it waits (in scan order it would
    wait holding nothing), so a replica going the other way waits instead of deadlocking."""
    await create_cluster(api, "gpu-east")
    job = uuid.UUID((await submit(api, job_document("train"))).json()["uid"])
    early, late = uuid.UUID(int=1), uuid.UUID(int=2**128 - 1)  # message ids
    async with transaction(app.state.sessions) as session:
        cluster = (await session.execute(select(Cluster.id))).scalar_one()
        placements = [Placement(id=uuid.uuid4(), job_id=job, generation=g) for g in (1, 2)]
        session.add_all(placements)
        await session.flush()
        first, second = sorted(p.id for p in placements)
        for message_id, placement_id in ((late, first), (early, second)):  # late written first
            session.add(
                OutboxMessage(
                    id=message_id,
                    cluster_id=cluster,
                    placement_id=placement_id,
                    kind=OutboxKind.ASSIGN,
                    payload={},
                )
            )
            await session.flush()
    delivered = {(cluster, first, OutboxKind.ASSIGN), (cluster, second, OutboxKind.ASSIGN)}
    by_id = select(OutboxMessage.id).where(OutboxMessage.id == bindparam("id"))

    async with app.state.sessions() as holder, holder.begin():
        await holder.execute(by_id.with_for_update(), {"id": late})
        acknowledging = asyncio.create_task(_acknowledge(app, delivered))
        await eventually(lambda: _waiting_for_a_lock(app))
        async with app.state.sessions() as probe, probe.begin():
            with pytest.raises(DBAPIError) as caught:
                await probe.execute(by_id.with_for_update(nowait=True), {"id": early})
            assert "could not obtain lock" in str(caught.value)
    await asyncio.wait_for(acknowledging, timeout=REPLY_S)
    async with transaction(app.state.sessions) as session:
        acked = (await session.execute(select(OutboxMessage.acked_at))).scalars().all()
    assert len(acked) == 2 and all(acked)


async def _acknowledge(app: FastAPI, delivered: set[tuple[uuid.UUID, uuid.UUID, Any]]) -> None:
    async with transaction(app.state.sessions) as session:
        await outbox.acknowledge(session, delivered=delivered)


async def _waiting_for_a_lock(app: FastAPI) -> bool:
    async with app.state.engine.connect() as connection:
        waiting = await connection.execute(
            text(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock' AND query LIKE 'UPDATE outbox%'"
            )
        )
        return bool(waiting.scalar_one())
