"""Postgres: a scheduling round's commit and a group commit of agents' deltas both lock several
clusters' rows; in one order (by name), so one waits for the other instead of deadlocking.
The round locked them in its plan's scan order, the table's physical order when small."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import text

from tests.factories import create_cluster, eventually, job_document, submit
from tests.grpc_stream import Stream, snapshot
from volcano_global.db.engine import create_engine, transaction
from volcano_global.schemas.clusters import InventoryDelta
from volcano_global.services.inventory.delta_writer import DeltaRun
from volcano_global.services.inventory.sequence import NumberedDelta


@pytest.fixture
def database_url(postgres_url: str) -> str:
    """Postgres only: SQLite has one writer at a time, no row locks."""
    from tests.conftest import empty_postgres

    asyncio.run(empty_postgres(postgres_url))
    return postgres_url


async def lock_waiters(app: FastAPI) -> int:
    async with transaction(app.state.sessions) as session:
        return int(
            await session.scalar(
                text(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                    "AND datname = current_database()"
                )
            )
        )


async def test_a_round_commit_and_a_delta_group_wait_for_each_other_without_deadlock(
    app: FastAPI, api: httpx.AsyncClient, database_url: str
) -> None:
    for name in ("west", "east"):  # west's row first in the table, east first by name
        stream = Stream(app, str((await create_cluster(api, name))["agentToken"]))
        await stream.hello(name)
        assert (await stream.send(snapshot(1))).ack.seq == 1
        await stream.close()
    # West's row before east's in the table (else the round's old scan order was name order
    # too): a later write of west's row (a heartbeat's, written within a second) moves it
    # behind east's, so east's is rewritten last until the order holds.
    await eventually(lambda: _west_first(app))
    uid = (await submit(api, job_document("one", replicas=1))).json()["uid"]

    delta = InventoryDelta.model_validate(
        {
            "nodeUpserts": [
                {
                    "name": "n0",
                    "gpuModel": "H100",
                    "gpuAllocatable": 8,
                    "gpuUsed": 1,
                    "domain": "tor0",
                }
            ]
        }
    )
    engine = create_engine(database_url)
    try:
        async with engine.connect() as holder:  # another writer holds east
            await holder.execute(text("SELECT id FROM clusters WHERE name = 'east' FOR UPDATE"))
            writer = app.state.delta_writer
            group = asyncio.gather(
                *(writer.add(DeltaRun(n, [NumberedDelta(2, delta)])) for n in ("east", "west"))
            )
            await eventually(lambda: writer.writing == 2)  # one transaction, waiting for east
            await eventually(lambda: lock_waiters(app))
            round_ = asyncio.create_task(app.state.scheduler.run_once())
            await eventually(lambda: _at_least(app, 2))  # the round waits too
            await holder.rollback()
        outcomes = await asyncio.wait_for(group, 20)
        assert [o.acked_seq for o in outcomes] == [2, 2]
        assert (await asyncio.wait_for(round_, 20)) is not None
    finally:
        await engine.dispose()
    job = (await api.get(f"/api/v1/jobs/{uid}")).json()
    assert job["placement"] is not None, job


async def _west_first(app: FastAPI) -> bool:
    async with transaction(app.state.sessions) as session:
        await session.execute(text("UPDATE clusters SET name = name WHERE name = 'east'"))
    async with transaction(app.state.sessions) as session:
        physical = list(
            (await session.execute(text("SELECT name FROM clusters ORDER BY ctid"))).scalars()
        )
    return physical == ["west", "east"]


async def _at_least(app: FastAPI, count: int) -> bool:
    return await lock_waiters(app) >= count
