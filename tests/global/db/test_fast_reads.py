"""Reads on the driver's connection (`db/fast_reads.py`): the rows SQLAlchemy would return,
with the same keys and Python values, on both databases; driver errors raised as
SQLAlchemy's, a dead connection dropped from the pool."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import any_, bindparam, select, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import aliased

from tests.factories import create_cluster, job_document, submit
from volcano_global.db.engine import create_engine, create_session_factory, reading
from volcano_global.db.fast_reads import Read
from volcano_global.db.models import Cluster, Job, Link, Queue

JOBS = Read(
    select(*Job.__table__.c, Queue.name.label("queue_name"))
    .join(Queue, Queue.id == Job.queue_id)
    .where(Job.name.in_(bindparam("names", expanding=True)), Job.priority >= bindparam("p"))
    .order_by(Job.name)
)
A, B = aliased(Cluster), aliased(Cluster)
LINKS = Read(
    select(A.name.label("a"), B.name.label("b"), Link.capacity_gbps, A.state, A.created_at)
    .join(A, A.id == Link.cluster_a_id)
    .join(B, B.id == Link.cluster_b_id)
)


async def test_rows_are_what_sqlalchemy_returns_with_the_same_types(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    for name in ("a", "b", "c"):
        assert (await submit(api, job_document(name))).status_code == 201
    for name in ("east", "west"):
        await create_cluster(api, name)
    link = {"clusterA": "east", "clusterB": "west", "capacityGbps": 12.5, "latencyMs": 1}
    assert (await api.post("/api/v1/links", json=link)).status_code == 201
    for read, params in (
        (JOBS, {"names": ["a", "c", "missing"], "p": 0}),
        (JOBS, {"names": ["b"], "p": 0}),
        (LINKS, {}),
    ):
        async with reading(app.state.sessions) as session:
            rows = await read.rows(session, params)
            expected = [
                dict(zip(read.keys, row, strict=True))
                for row in await session.execute(read.statement, params)
            ]
        assert rows == expected
        assert rows
        for row, want in zip(rows, expected, strict=True):
            for key, value in want.items():
                assert isinstance(row[key], type(value)), (key, row[key], value)
    async with reading(app.state.sessions) as session:
        assert [r["name"] for r in await JOBS.rows(session, {"names": ["c", "a"], "p": 0})] == [
            "a",
            "c",
        ]
        assert await JOBS.one_or_none(session, {"names": ["zz"], "p": 0}) is None
        with pytest.raises(ValueError, match="at most one row"):
            await JOBS.one_or_none(session, {"names": ["a", "b"], "p": 0})


async def test_records_read_by_key_as_rows(app: FastAPI, api: httpx.AsyncClient) -> None:
    """`records` answers what `rows` does, read by key: the driver's records where they hold
    the same (no value to convert), else the rows (JOBS converts values; a key taken twice
    differs from the driver's)."""
    for name in ("a", "b"):
        assert (await submit(api, job_document(name))).status_code == 201
    await create_cluster(api, "east")
    names = Read(
        select(Job.name, Job.priority).where(Job.name.in_(bindparam("names", expanding=True)))
    )
    twice = Read(select(Queue.name, Cluster.name).join(Cluster, Cluster.id != Queue.id))
    for read, params in (
        (names, {"names": ["a", "b"]}),
        (JOBS, {"names": ["a", "b"], "p": 0}),
        (twice, {}),
    ):
        async with reading(app.state.sessions) as session:
            rows = await read.rows(session, params)
            records = await read.records(session, params)
        assert rows
        assert [{key: record[key] for key in read.keys} for record in records] == rows


async def test_a_postgres_form_gives_the_same_rows(app: FastAPI, api: httpx.AsyncClient) -> None:
    for name in ("a", "b", "c"):
        assert (await submit(api, job_document(name))).status_code == 201
    read = Read(
        select(Job.name).where(Job.name.in_(bindparam("names", expanding=True))),
        postgres=select(Job.name).where(
            Job.name == any_(bindparam("names", type_=ARRAY(Job.name.type)))
        ),
    )
    async with reading(app.state.sessions) as session:
        for names in (["a", "c", "zz"], ["b"], []):
            rows = await read.rows(session, {"names": names})
            assert sorted(r["name"] for r in rows) == sorted(set(names) - {"zz"})
    with pytest.raises(ValueError, match="same columns"):
        Read(select(Job.name), postgres=select(Job.id))


async def test_a_column_name_taken_twice_gets_sqlalchemys_key(app: FastAPI) -> None:
    read = Read(select(Queue.id, Queue.name, Cluster.id).join(Cluster, Cluster.id != Queue.id))
    assert read.keys == ["id", "name", "id_1"]
    async with reading(app.state.sessions) as session:
        assert await read.rows(session, {}) == []  # no cluster yet


async def test_a_dead_connection_raises_sqlalchemys_error_and_leaves_the_pool(
    postgres_url: str,
) -> None:
    """Postgres only: SQLite reads go through SQLAlchemy."""
    engine = create_engine(postgres_url, pool_size=2)
    sessions = create_session_factory(engine)
    queues = Read(select(Queue.id, Queue.name))
    try:
        async with reading(sessions) as session:
            pid = (await session.execute(text("SELECT pg_backend_pid()"))).scalar_one()
            async with reading(sessions) as other:
                await other.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
            with pytest.raises(DBAPIError):
                await queues.rows(session, {})
        for _ in range(3):  # whichever pooled connection comes next works
            async with reading(sessions) as session:
                assert isinstance(await queues.rows(session, {}), list)
    finally:
        await engine.dispose()
