"""The node change log: per cluster, the names of the nodes each transaction of deltas upserted,
at the inventory sequence it stored (`NodeChange`), written in that transaction. Readers of
"the nodes changed since sequence s" (the scheduler's capacity view) read the nodes the log
names above s, instead of an index on the nodes' own sequence: such an index changed with every
delta's UPDATE of every node, so none could be HOT, and keeping it was 40% of Postgres' CPU in
the delta benchmark (docs/benchmarks.md, "Deltas, session 9" and "session 11").

Each cluster's row says what its log covers: every node upsert of the current inventory
generation at a sequence in (`node_changes_floor`, `node_changes_seq`]. The writers keep it so:

- a delta that upserts nodes logs their names at its sequence (`log_upserts`);
- whatever stores a new sequence moves `node_changes_seq` with it (`store_seq`), unless the log
  already trailed: a writer of an older release stored sequences without logging, and the next
  logging writer raises the floor to the sequence it found (`log_upserts`);
- the writers prune: once a cluster's log spans more than `2 * KEPT_SEQS` sequences, the rows
  at or below the newest less `KEPT_SEQS` go and the floor rises to it (one DELETE a cluster
  every `KEPT_SEQS` sequences or so, not one a delta). Agents send at most one delta per
  coalescing window (1 s by default) and the leader's rounds read at least every
  `scheduler.interval_s` (2 s), so 32-64 sequences are half a minute or more of history: a view
  further behind than that (a paused or new leader) reads its cluster whole, as at its first
  read. Rows stay small in number: 100 clusters, at most 6,400 rows;
- a snapshot empties the cluster's log and sets both bounds to its sequence (`restart_log`):
  its nodes are a new generation, which readers read whole.

Removals are not logged: a delta that removes nodes moves the cluster's `nodes_removed_seq`,
and readers then read the cluster whole (a removed row leaves nothing to read)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Select, and_, bindparam, column, delete, func, or_, select, true
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql.elements import ColumnElement

from volcano_global.db.fast_reads import Read
from volcano_global.db.models import Cluster, Node, NodeChange

KEPT_SEQS = 32


async def log_upserts(session: AsyncSession, upserts: list[tuple[Cluster, int, list[str]]]) -> None:
    """Log each (cluster, the sequence its delta stores, the names it upserted), pruning the
    clusters' logs that grew past their window; before `store_seq` of those sequences."""
    pruned: list[ColumnElement[bool]] = []
    for cluster, seq, _ in upserts:
        if cluster.node_changes_seq != cluster.inventory_seq:
            # Sequences stored without logging: the log starts again from the one stored.
            cluster.node_changes_floor = cluster.node_changes_seq = cluster.inventory_seq
            pruned.append(NodeChange.cluster_id == cluster.id)
        elif seq - cluster.node_changes_floor > 2 * KEPT_SEQS:
            cluster.node_changes_floor = floor = seq - KEPT_SEQS
            pruned.append(and_(NodeChange.cluster_id == cluster.id, NodeChange.seq <= floor))
    if pruned:
        await session.execute(delete(NodeChange).where(or_(*pruned)))
    rows = [
        {"cluster_id": cluster.id, "seq": seq, "names": names}
        for cluster, seq, names in upserts
        if names
    ]
    if rows:
        await session.execute(NodeChange.__table__.insert(), rows)


def store_seq(cluster: Cluster, seq: int) -> None:
    """Store the cluster's applied sequence; the log keeps covering it if it covered the last."""
    if cluster.node_changes_seq == cluster.inventory_seq:
        cluster.node_changes_seq = seq
    cluster.inventory_seq = seq


async def restart_log(session: AsyncSession, cluster: Cluster, seq: int) -> None:
    """A snapshot at `seq` replaced the cluster's nodes: its log starts again from `seq`."""
    await session.execute(delete(NodeChange).where(NodeChange.cluster_id == cluster.id))
    cluster.node_changes_floor = cluster.node_changes_seq = seq


class ChangedNodes:
    """A read of `columns` of the nodes the log names above a sequence of each cluster (a
    node named at several sequences comes once for each: its row is the same). On Postgres
    one fixed statement on the driver's connection (`fast_reads.Read`: the (cluster, sequence)
    pairs as two arrays); on SQLite SQLAlchemy runs it with a condition per cluster."""

    def __init__(self, columns: Sequence[ColumnElement[Any]]) -> None:
        self.columns = columns
        since = _SINCE.c
        self._postgres = Read(  # Postgres only
            _joined(columns, func.jsonb_array_elements_text).join(
                _SINCE, and_(NodeChange.cluster_id == since.cluster_id, NodeChange.seq > since.seq)
            )
        )

    async def rows(self, session: AsyncSession, since: Mapping[uuid.UUID, int]) -> list[Any]:
        """The rows as tuples of `columns`, `since`: cluster id -> the sequence seen."""
        if session.get_bind().dialect.name == "postgresql":
            ids = list(since)
            params = {"cluster_ids": ids, "seqs": [since[c] for c in ids]}
            return [tuple(row.values()) for row in await self._postgres.rows(session, params)]
        above = (and_(NodeChange.cluster_id == c, NodeChange.seq > s) for c, s in since.items())
        statement = _joined(self.columns, func.json_each).where(or_(*above))
        return [tuple(row) for row in await session.execute(statement)]


def _joined(columns: Sequence[ColumnElement[Any]], elements: Any) -> Select[Any]:
    """`columns` of the nodes each log row names (`elements`: the database's function listing
    a JSON array's elements)."""
    names = elements(NodeChange.names).table_valued("value")
    return (
        select(*columns)
        .select_from(NodeChange)
        .join(names, true())
        .join(Node, and_(Node.cluster_id == NodeChange.cluster_id, Node.name == names.c.value))
    )


_SINCE = (
    func.unnest(
        bindparam("cluster_ids", type_=ARRAY(NodeChange.cluster_id.type)),
        bindparam("seqs", type_=ARRAY(NodeChange.seq.type)),
    )
    .table_valued(
        column("cluster_id", NodeChange.cluster_id.type), column("seq", NodeChange.seq.type)
    )
    .render_derived(name="since")
)


async def covered(
    session: AsyncSession, since: Mapping[uuid.UUID, int], generations: Mapping[uuid.UUID, int]
) -> set[uuid.UUID]:
    """The clusters whose log, read before this call, held every node upsert above `since`
    of generation `generations[cluster]`. Read after the log: within a generation a prune only
    raises the floor and a writer that did not log leaves `node_changes_seq` behind, both in
    the transaction of the change, so bounds read afterwards that cover `since` prove the log
    read before had lost nothing above it."""
    rows = await session.execute(
        select(
            Cluster.id,
            Cluster.inventory_generation,
            Cluster.inventory_seq,
            Cluster.node_changes_floor,
            Cluster.node_changes_seq,
        ).where(Cluster.id.in_(list(since)))
    )
    return {
        cluster_id
        for cluster_id, generation, seq, floor, logged in rows
        if generation == generations[cluster_id] and floor <= since[cluster_id] and logged == seq
    }
