"""Many rows in one statement (SQLite and Postgres): the same outcome either way."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import insert, select, text
from sqlalchemy.exc import DBAPIError

from tests.factories import create_cluster
from volcano_global.db.bulk import add_to_rows, postgres_rows, update_rows
from volcano_global.db.engine import create_engine, transaction
from volcano_global.db.models import Cluster, ClusterGpuCapacity, Node


async def test_rows_are_updated_by_key_within_the_given_rows_only(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    east, west = [await _cluster_id(app, api, n) for n in ("east", "west")]
    before = datetime(2026, 1, 1, tzinfo=UTC)
    async with transaction(app.state.sessions) as session:
        await session.execute(
            insert(Node.__table__),
            [
                {
                    "id": uuid.uuid4(),
                    "cluster_id": c,
                    "name": f"n{i}",
                    "gpu_allocatable": 8,
                    "labels": {},
                    "taints": [],
                    "updated_at": before,
                    "seq": 1,
                }
                for c in (east, west)
                for i in range(3)
            ],
        )
    now = datetime(2026, 2, 1, 12, 30, tzinfo=UTC)
    async with transaction(app.state.sessions) as session:
        await update_rows(
            session,
            Node.__table__,
            [
                {
                    "name": "n0",
                    "gpu_allocatable": 5,
                    "labels": {"rack": 'a"b'},
                    "taints": [{"k": 1}],
                },
                {"name": "n2", "gpu_allocatable": 4, "labels": {}, "taints": []},
                {"name": "gone", "gpu_allocatable": 1, "labels": {}, "taints": []},  # no such node
            ],
            key="name",
            where={"cluster_id": east},
            values={"updated_at": now, "seq": 7},
        )
    async with transaction(app.state.sessions) as session:
        rows = (
            await session.execute(
                select(
                    Node.cluster_id,
                    Node.name,
                    Node.gpu_allocatable,
                    Node.labels,
                    Node.taints,
                    Node.updated_at,
                    Node.seq,
                )
            )
        ).all()
    got = {(r.cluster_id, r.name): r for r in rows}
    assert len(got) == 6
    n0 = got[(east, "n0")]
    assert (n0.gpu_allocatable, n0.labels, n0.taints, n0.seq) == (
        5,
        {"rack": 'a"b'},
        [{"k": 1}],
        7,
    )
    assert n0.updated_at == now
    assert got[(east, "n2")].gpu_allocatable == 4
    assert got[(east, "n1")].seq == 1
    assert got[(east, "n1")].updated_at == before  # not given
    assert all(got[(west, f"n{i}")].gpu_allocatable == 8 for i in range(3))  # another cluster's


async def test_added_rows_are_inserted_or_summed_into_existing_ones(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    east = await _cluster_id(app, api, "east")
    table = ClusterGpuCapacity.__table__
    for rows in (
        [{"cluster_id": east, "gpu_model": "A100", "total_gpus": 8, "free_gpus": 8}],
        [
            {"cluster_id": east, "gpu_model": "A100", "total_gpus": 8, "free_gpus": -3},
            {"cluster_id": east, "gpu_model": "H100", "total_gpus": 16, "free_gpus": 16},
        ],
    ):
        async with transaction(app.state.sessions) as session:
            await add_to_rows(
                session,
                table,
                rows,
                keys=("cluster_id", "gpu_model"),
                added=("total_gpus", "free_gpus"),
            )
    async with transaction(app.state.sessions) as session:
        stored = {
            r.gpu_model: (r.total_gpus, r.free_gpus)
            for r in await session.execute(select(table).where(table.c.cluster_id == east))
        }
    assert stored == {"A100": (16, 5), "H100": (16, 16)}


async def _cluster_id(app: FastAPI, api: httpx.AsyncClient, name: str) -> uuid.UUID:
    await create_cluster(api, name)
    async with transaction(app.state.sessions) as session:
        return (await session.execute(select(Cluster.id).where(Cluster.name == name))).scalar_one()


async def test_a_raw_statement_cancelled_mid_way_leaves_no_connection_busy(
    postgres_url: str,
) -> None:
    """Postgres only (`postgres_rows` runs on asyncpg): a statement cancelled while the server
    runs it drops its connection; the pool's next connections work, and a server error comes
    out as SQLAlchemy's exception, through the statement run again."""
    engine = create_engine(postgres_url, pool_size=1)
    sleep = text("SELECT pg_sleep(CAST(CAST(:s AS text) AS float))::text AS slept")
    try:
        async with engine.connect() as connection:
            task = asyncio.create_task(postgres_rows(connection, sleep, {"s": "30"}))
            await asyncio.sleep(0.5)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        for _ in range(3):  # the pool's one connection: a sound one
            async with engine.connect() as connection:
                assert await postgres_rows(connection, sleep, {"s": "0"}) == [("",)]
        async with engine.connect() as connection:
            busy = text("SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep%'")
            assert (await connection.execute(busy)).scalar_one() == 0
        async with engine.connect() as connection:
            with pytest.raises(DBAPIError):
                await postgres_rows(connection, sleep, {"s": "not a number"})
    finally:
        await engine.dispose()
