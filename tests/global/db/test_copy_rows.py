"""Rows inserted as tuples in the driver's terms (COPY on Postgres, the driver's executemany
on SQLite) read back as the ORM wrote them: UUIDs, JSON, booleans, timestamps; new ids are
distinct version-4 UUIDs; a refused row leaves nothing of the batch."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import Table, select, text
from sqlalchemy.exc import DBAPIError, IntegrityError

from tests.factories import create_cluster
from volcano_global.db.copy_rows import (
    _array_type,
    insert_columns,
    insert_tuples,
    update_tuples,
    uuid_texts,
)
from volcano_global.db.engine import create_engine, transaction
from volcano_global.db.models import Cluster, Node, NodeUse
from volcano_global.services.inventory.node_rows import UPDATED as _UPDATED
from volcano_global.services.inventory.node_rows import UPDATED_TYPE as _UPDATED_TYPE
from volcano_global.services.inventory.node_usages import USAGE_TYPE, USAGE_UPDATED
from volcano_global.services.inventory.node_values import STORED

COLUMNS = ("name", "gpu_allocatable", "ready", "labels", "taints", "domain_id")
ROWS = [
    ("n0", 8, True, {"zone": "a", "ünï": "ç"}, [{"key": "k", "value": None, "effect": "E"}], None),
    ("n1", 0, False, {}, [], None),
]


def test_new_ids_are_version_4_uuids() -> None:
    for dashed in (True, False):
        texts = uuid_texts(1000, dashed=dashed)
        ids = [uuid.UUID(t) for t in texts]
        assert len(set(ids)) == 1000
        assert all(i.version == 4 and i.variant == uuid.RFC_4122 for i in ids)
        assert all(("-" in t) == dashed for t in texts)


async def test_rows_read_back_as_written(app: FastAPI, api: httpx.AsyncClient) -> None:
    cluster_id = await _cluster_id(app, api)
    stamp = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    async with transaction(app.state.sessions) as session:
        constants = {"cluster_id": cluster_id, "updated_at": stamp, "seq": 7}
        await insert_tuples(session, Node.__table__, COLUMNS, ROWS, constants=constants)
    async with transaction(app.state.sessions) as session:
        nodes = (await session.execute(select(Node).order_by(Node.name))).scalars().all()
    assert [tuple(getattr(n, c) for c in COLUMNS) for n in nodes] == ROWS
    assert all(n.cluster_id == cluster_id and n.seq == 7 for n in nodes)
    assert all(n.updated_at == stamp for n in nodes)
    assert all(isinstance(n.id, uuid.UUID) and n.id.version == 4 for n in nodes)


async def test_a_refused_row_leaves_nothing(app: FastAPI, api: httpx.AsyncClient) -> None:
    cluster_id = await _cluster_id(app, api)
    constants = {"cluster_id": cluster_id, "updated_at": datetime.now(UTC), "seq": 1}
    with pytest.raises(IntegrityError):
        async with transaction(app.state.sessions) as session:
            twice = [ROWS[0], ROWS[1], ROWS[0]]  # (cluster, name) is unique
            await insert_tuples(session, Node.__table__, COLUMNS, twice, constants=constants)
    async with transaction(app.state.sessions) as session:
        assert (await session.execute(select(Node.id))).all() == []


async def test_columns_of_different_lengths_are_refused(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    # Postgres' unnest pads the shorter arrays with NULLs: the rows would be stored half empty.
    cluster_id = await _cluster_id(app, api)
    constants = {"cluster_id": cluster_id, "updated_at": datetime.now(UTC), "seq": 1}
    columns = {"name": ["n0", "n1", "n2"], "gpu_allocatable": [8]}
    with pytest.raises(ValueError, match="different lengths"):
        async with transaction(app.state.sessions) as session:
            await insert_columns(session, Node.__table__, columns, constants=constants)
    with pytest.raises(ValueError, match="without columns"):
        async with transaction(app.state.sessions) as session:
            await insert_tuples(session, Node.__table__, (), [(), ()], constants=constants)
    async with transaction(app.state.sessions) as session:
        assert (await session.execute(select(Node.id))).all() == []


async def _cluster_id(app: FastAPI, api: httpx.AsyncClient) -> uuid.UUID:
    await create_cluster(api, "east")
    async with transaction(app.state.sessions) as session:
        return (
            await session.execute(select(Cluster.id).where(Cluster.name == "east"))
        ).scalar_one()


async def test_a_name_longer_than_its_column_is_refused_not_cut(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    """The schemas keep such names out; the database backs them up (Postgres: an explicit
    cast to the array's VARCHAR(n) would cut it silently). SQLite has no lengths."""
    if app.state.engine.dialect.name != "postgresql":
        return  # SQLite stores text of any length: nothing to refuse there
    cluster_id = await _cluster_id(app, api)
    constants = {"cluster_id": cluster_id, "updated_at": datetime.now(UTC), "seq": 1}
    with pytest.raises(DBAPIError, match="too long"):
        async with transaction(app.state.sessions) as session:
            long_name = [("n" * 300, *ROWS[0][1:])]
            await insert_tuples(session, Node.__table__, COLUMNS, long_name, constants=constants)


async def test_updated_rows_read_back_as_written(app: FastAPI, api: httpx.AsyncClient) -> None:
    """On Postgres the rows go as one array of the `node_update` composite type: each row's
    values land in their columns, found by (cluster, name); the constants in every row."""
    cluster_id = await _cluster_id(app, api)
    first = datetime(2026, 1, 2, tzinfo=UTC)
    async with transaction(app.state.sessions) as session:
        constants = {"cluster_id": cluster_id, "updated_at": first, "seq": 1}
        await insert_tuples(session, Node.__table__, COLUMNS, ROWS, constants=constants)
    later = datetime(2026, 1, 3, tzinfo=UTC)
    changed = [
        (
            *row[:_SCALARS],
            {"zone": "b"},
            [{"key": "k2", "value": "v", "effect": "E"}],
            None,
            9,
            cluster_id,
        )
        for row in _full(ROWS)
    ]
    changed[1] = (*changed[1][:2], 4, *changed[1][3:])  # n1: 4 GPUs
    async with transaction(app.state.sessions) as session:
        await update_tuples(
            session,
            Node.__table__,
            _UPDATED,
            changed,
            keys=("cluster_id", "name"),
            constants={"updated_at": later},
            row_type=_UPDATED_TYPE,
        )
    async with transaction(app.state.sessions) as session:
        nodes = (await session.execute(select(Node).order_by(Node.name))).scalars().all()
    assert [tuple(getattr(n, c) for c in _UPDATED) for n in nodes] == changed
    assert all(n.updated_at == later for n in nodes)


_SCALARS = len(STORED) - 2  # the columns of _UPDATED before labels and taints


def _full(rows: list[tuple[object, ...]]) -> list[tuple[object, ...]]:
    """`ROWS` as values for the scalar columns of `_UPDATED` (the others at their defaults)."""
    defaults = dict.fromkeys(_UPDATED[:_SCALARS], 0) | {"gpu_model": None}
    return [
        tuple((defaults | dict(zip(COLUMNS, r, strict=True)))[c] for c in _UPDATED[:_SCALARS])
        for r in rows
    ]


@pytest.mark.parametrize(
    ("type_name", "table", "columns"),
    [(_UPDATED_TYPE, Node.__table__, _UPDATED), (USAGE_TYPE, NodeUse.__table__, USAGE_UPDATED)],
)
async def test_the_node_update_types_hold_the_updated_columns_in_order(
    postgres_url: str, type_name: str, table: Table, columns: tuple[str, ...]
) -> None:
    """The delta's UPDATEs send rows of `node_update` and `node_usage` (migrations) for
    `_UPDATED` and `USAGE_UPDATED` (the code): each pair must not drift apart."""
    engine = create_engine(postgres_url, pool_size=1)
    try:
        async with engine.connect() as connection:
            rows = await connection.execute(
                text(
                    "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a "
                    "JOIN pg_type t ON a.attrelid = t.typrelid WHERE t.typname = :name "
                    "AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum"
                ),
                {"name": type_name},
            )
            attributes = [tuple(r) for r in rows]
    finally:
        await engine.dispose()
    expected = [(c, _array_type(table.c[c].type).lower()) for c in columns]
    assert attributes == expected
