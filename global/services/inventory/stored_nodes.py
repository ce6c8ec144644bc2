"""What the delta writer reads of the stored nodes a delta names: their name and the columns
free capacity is counted from (`snapshots.NODE_CAPACITY_COLUMNS`), read by key (on Postgres
the driver's records: `fast_reads.Read.records`; on SQLite one statement on the driver)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from sqlalchemy import Integer, bindparam, column, func, select, true
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db import json_text
from volcano_global.db.fast_reads import Read
from volcano_global.db.models import NODE_USE, Node, NodeUse
from volcano_global.db.parts import parts
from volcano_global.services.inventory.snapshots import NODE_CAPACITY_COLUMNS

StoredRow = Mapping[str, Any]  # a stored node's name and capacity columns, by key


async def stored_nodes(
    session: AsyncSession, names: dict[uuid.UUID, list[str]]
) -> dict[uuid.UUID, dict[str, StoredRow]]:
    """The stored rows of the nodes named (`StoredRow`), by cluster id and name: one read for
    all clusters (on Postgres the pairs as two arrays)."""
    found: dict[uuid.UUID, dict[str, StoredRow]] = {cluster_id: {} for cluster_id in names}
    if session.get_bind().dialect.name != "postgresql":
        return await _sqlite_stored_nodes(session, names, found)
    ids = list(names)  # each row comes back with its cluster's index (no UUID to convert)
    params: dict[str, list[Any]] = {"cluster_ids": [], "names": [], "runs": []}
    for n, cluster_id in enumerate(ids):  # whole lists at a time, not a pair at a time
        params["cluster_ids"] += [cluster_id] * len(names[cluster_id])
        params["names"] += names[cluster_id]
        params["runs"] += [n] * len(names[cluster_id])
    for row in await _EXISTING_PAIRS.records(session, params):
        found[ids[row["run"]]][row["name"]] = row
    return found


async def _sqlite_stored_nodes(
    session: AsyncSession,
    names: dict[uuid.UUID, list[str]],
    found: dict[uuid.UUID, dict[str, StoredRow]],
) -> dict[uuid.UUID, dict[str, StoredRow]]:
    """SQLite: one statement for every cluster, the (cluster, name) pairs as one JSON
    parameter SQLite unpacks itself (`json_each`), run in the driver's terms: no parameter
    per name for SQLAlchemy to render, no row converted by its types, and SQLite's own work
    outside the GIL (docs/benchmarks.md, "SQLite's checkpoints in a thread of their own")."""
    ids = list(names)
    pairs = [
        (n, cluster_id.hex, name) for n, cluster_id in enumerate(ids) for name in names[cluster_id]
    ]
    connection = await session.connection()
    result = await connection.exec_driver_sql(_SQLITE_PAIRS, (json_text.dumps(pairs),))
    domains: dict[str, uuid.UUID] = {}  # a cluster's nodes share a few hundred domains
    for run, *values in result:
        row = dict(zip(_KEYS, values, strict=True))
        if (domain := row["domain_id"]) is not None:  # stored as 32 hex digits
            row["domain_id"] = domains.get(domain) or domains.setdefault(domain, uuid.UUID(domain))
        row["ready"], row["schedulable"] = bool(row["ready"]), bool(row["schedulable"])
        found[ids[run]][row["name"]] = row
    return found


async def stored_names(session: AsyncSession, cluster_id: uuid.UUID, names: set[str]) -> set[str]:
    """Which of these names the cluster's stored nodes hold."""
    found: set[str] = set()
    for part in parts(sorted(names), NAMES_A_STATEMENT):
        rows = await session.execute(
            select(Node.name).where(Node.cluster_id == cluster_id, Node.name.in_(part))
        )
        found.update(rows.scalars())
    return found


# Node names a statement takes, within its bind parameters (SQLite and asyncpg: 32,766 and
# 32,767 a statement): a run of merged deltas may name far more than one message's 20,000 (13
# deltas of 20,000 new nodes: 260,000).
NAMES_A_STATEMENT = 20_000


# The stored state of the nodes a delta names (read on the driver's connection; on Postgres
# the (cluster, name) pairs go as two array parameters, on SQLite as one JSON array).
_EXISTING_COLUMNS = (Node.name, *NODE_CAPACITY_COLUMNS)
_KEYS = tuple(c.key for c in _EXISTING_COLUMNS)
# Table and column names come from the model, never from input; json_each first (CROSS JOIN
# keeps that order): each pair finds its node through the (cluster_id, name) index.
# json_extract rather than `->>`, which needs SQLite 3.38.
_SQLITE_COLUMNS = ", ".join(
    f"{'u' if c.table is NodeUse.__table__ else 'n'}.{c.key}" for c in _EXISTING_COLUMNS
)
_SQLITE_PAIRS = (
    f"SELECT json_extract(p.value, '$[0]'), {_SQLITE_COLUMNS} "
    f"FROM json_each(?) AS p CROSS JOIN {Node.__tablename__} AS n "
    f"JOIN {NodeUse.__tablename__} AS u ON u.cluster_id = n.cluster_id AND u.name = n.name "
    "WHERE n.cluster_id = json_extract(p.value, '$[1]') "
    "AND n.name = json_extract(p.value, '$[2]')"
)
_PAIRS = (
    func.unnest(
        bindparam("cluster_ids", type_=ARRAY(Node.cluster_id.type)),
        bindparam("names", type_=ARRAY(Node.name.type)),
        bindparam("runs", type_=ARRAY(Integer())),
    )
    .table_valued(
        column("cluster_id", Node.cluster_id.type),
        column("name", Node.name.type),
        column("run", Integer()),
    )
    .render_derived(name="wanted")
)
# Each pair's node and usage found by key, one pair at a time (LATERAL ... LIMIT 1): as a plain
# three-way join the planner sized the pairs from the arrays (12,500 a batch) and read all of
# `node_usages` into a hash, or sorted it in parallel workers: half the benchmark's updates/s.
_STORED = (
    select(*_EXISTING_COLUMNS)
    .join(NodeUse, NODE_USE)
    .where(Node.cluster_id == _PAIRS.c.cluster_id, Node.name == _PAIRS.c.name)
    .limit(1)
    .lateral("stored")
)
_EXISTING_PAIRS = Read(  # Postgres only
    select(_PAIRS.c.run, *_STORED.c).select_from(_PAIRS).join(_STORED, true())
)
