"""What the delta writer reads of the stored nodes a delta names: their name and the columns
free capacity is counted from (`snapshots.NODE_CAPACITY_COLUMNS`), read by key (on Postgres
the driver's records: `fast_reads.Read.records`)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from sqlalchemy import Integer, and_, any_, bindparam, column, func, select
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.fast_reads import Read
from volcano_global.db.models import Node
from volcano_global.services.inventory.snapshots import NODE_CAPACITY_COLUMNS

StoredRow = Mapping[str, Any]  # a stored node's name and capacity columns, by key


async def stored_nodes(
    session: AsyncSession, names: dict[uuid.UUID, list[str]]
) -> dict[uuid.UUID, dict[str, StoredRow]]:
    """The stored rows of the nodes named (`StoredRow`), by cluster id and name: on
    Postgres one read for all clusters (the pairs as two arrays); on SQLite one per cluster
    (its bind parameters are limited to 32,766 a statement, and a read there is a call, not a
    round trip)."""
    found: dict[uuid.UUID, dict[str, StoredRow]] = {cluster_id: {} for cluster_id in names}
    if session.get_bind().dialect.name == "postgresql":
        ids = list(names)  # each row comes back with its cluster's index (no UUID to convert)
        params: dict[str, list[Any]] = {"cluster_ids": [], "names": [], "runs": []}
        for n, cluster_id in enumerate(ids):  # whole lists at a time, not a pair at a time
            params["cluster_ids"] += [cluster_id] * len(names[cluster_id])
            params["names"] += names[cluster_id]
            params["runs"] += [n] * len(names[cluster_id])
        for row in await _EXISTING_PAIRS.records(session, params):
            found[ids[row["run"]]][row["name"]] = row
        return found
    for cluster_id, cluster_names in names.items():
        for part in chunks(cluster_names):
            params = {"cluster_id": cluster_id, "names": part}
            found[cluster_id] |= {row["name"]: row for row in await _EXISTING.rows(session, params)}
    return found


async def stored_names(session: AsyncSession, cluster_id: uuid.UUID, names: set[str]) -> set[str]:
    """Which of these names the cluster's stored nodes hold."""
    found: set[str] = set()
    for part in chunks(sorted(names)):
        rows = await session.execute(
            select(Node.name).where(Node.cluster_id == cluster_id, Node.name.in_(part))
        )
        found.update(rows.scalars())
    return found


def chunks(names: list[str]) -> list[list[str]]:
    """Names in parts that fit a statement's bind parameters (SQLite and asyncpg: 32,766 and
    32,767 a statement): a run of merged deltas may name far more than one message's 20,000
    (13 deltas of 20,000 new nodes: 260,000)."""
    return [
        names[start : start + _NAMES_A_STATEMENT]
        for start in range(0, len(names), _NAMES_A_STATEMENT)
    ]


_NAMES_A_STATEMENT = 20_000


# The stored state of the nodes a delta names (read on the driver's connection; on Postgres
# the names go as one array parameter, or the (cluster, name) pairs as two).
_EXISTING_COLUMNS = (Node.name, *NODE_CAPACITY_COLUMNS)
_IN_CLUSTER = Node.cluster_id == bindparam("cluster_id", type_=Node.cluster_id.type)
_EXISTING = Read(
    select(*_EXISTING_COLUMNS).where(
        _IN_CLUSTER, Node.name.in_(bindparam("names", expanding=True))
    ),
    postgres=select(*_EXISTING_COLUMNS).where(
        _IN_CLUSTER, Node.name == any_(bindparam("names", type_=ARRAY(Node.name.type)))
    ),
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
_EXISTING_PAIRS = Read(  # Postgres only
    select(_PAIRS.c.run, *_EXISTING_COLUMNS).join(
        _PAIRS, and_(Node.cluster_id == _PAIRS.c.cluster_id, Node.name == _PAIRS.c.name)
    )
)
