"""The node change log: per cluster, what each transaction of deltas wrote of the nodes it
upserted (their name and the columns free capacity is counted from: `LOGGED`), at the
inventory sequence it stored (`NodeChange`), written in that transaction. Readers of "the nodes
changed since sequence s" (the scheduler's capacity view) read the log's rows above s, in
order, and not the nodes: an index on the nodes' own sequence, which served that read before,
changed with every delta's UPDATE of every node, so none could be HOT, and keeping it was 40%
of Postgres' CPU in the delta benchmark; reading the nodes the log named, by name, cost
Postgres seven times the index's read (docs/benchmarks.md, "Deltas, session 11").

Each cluster's row says what its log covers: every node upsert of the current inventory
generation at a sequence in (`node_changes_floor`, `node_changes_seq`]. The writers keep it so:

- a delta that upserts nodes logs their values at its sequence (`log_upserts`);
- whatever stores a new sequence moves `node_changes_seq` with it (`store_seq`), unless the log
  already trailed: a writer of an older release stored sequences without logging, and the next
  logging writer raises the floor to the sequence it found (`log_upserts`);
- the writers prune, bounded by the nodes the log holds (`node_changes_nodes`, each row's
  `node_count`) rather than by sequences: once a cluster's log holds more than twice
  `kept_nodes` (as many as the cluster has, at least `KEPT_NODES`) over more than
  `2 * KEPT_SEQS` sequences, the oldest rows go until it holds at most `kept_nodes`, keeping
  the newest `KEPT_SEQS` sequences whatever they hold. A busy cluster's agent sends a delta
  of a few nodes each time a share's pods come or go, many a second, which a window of
  sequences covered for less than a round's period (the leader then read such clusters whole
  every round: docs/benchmarks.md, "SQLite's deltas and the node change log, session 20");
  bounded by nodes, the same log covers minutes of them, and a cluster changing hundreds of
  nodes a delta is pruned as before, every `KEPT_SEQS` sequences or so.
  A view that is behind reads from the log at most about twice `kept_nodes` (twice the
  cluster's nodes, 2,000 for a cluster under 1,000) or 32 rows of large deltas, and a view
  further behind (a paused or new leader) reads its cluster whole, as at its first read.
  One DELETE a cluster every `KEPT_SEQS` sequences and `kept_nodes` nodes at most; the log
  stays bounded likewise (about 33 kB a row of 500 nodes);
- a snapshot empties the cluster's log and sets both bounds to its sequence (`restart_log`):
  its nodes are a new generation, which readers read whole.

Removals are not logged: a delta that removes nodes moves the cluster's `nodes_removed_seq`,
and readers then read the cluster whole (a removed row leaves nothing to read)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from sqlalchemy import and_, delete, or_, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql.elements import ColumnElement

from volcano_global.db.models import Cluster, NodeChange

KEPT_SEQS = 16
KEPT_NODES = 1_000


# What the log holds of an upserted node, in this order: its name, then its domain's id (a
# string, or None) and the capacity columns (`snapshots.NODE_CAPACITY_COLUMNS`).
LOGGED = ("name", "domain_id", "gpu_model", "gpu_allocatable", "gpu_used", "ready", "schedulable")
LoggedNode = list[Any]  # the values of LOGGED


def kept_nodes(cluster: Cluster) -> int:
    """How many logged nodes the cluster's log keeps after a prune (at most)."""
    return max(KEPT_NODES, cluster.nodes_total)


async def log_upserts(
    session: AsyncSession, upserts: list[tuple[Cluster, int, list[LoggedNode]]]
) -> None:
    """Log each (cluster, the sequence its delta stores, the nodes it upserted as written) of
    distinct clusters, pruning the clusters' logs that grew past their bound; before
    `store_seq` of those sequences."""
    restarted = []
    for cluster, _, nodes in upserts:
        if cluster.node_changes_seq != cluster.inventory_seq:
            # Sequences stored without logging: the log starts again from the one stored.
            cluster.node_changes_floor = cluster.node_changes_seq = cluster.inventory_seq
            cluster.node_changes_nodes = 0
            restarted.append(cluster.id)
        cluster.node_changes_nodes += len(nodes)
    if restarted:
        await session.execute(delete(NodeChange).where(NodeChange.cluster_id.in_(restarted)))
    rows = [
        {"cluster_id": cluster.id, "seq": seq, "nodes": nodes, "node_count": len(nodes)}
        for cluster, seq, nodes in upserts
        if nodes
    ]
    if rows:
        await session.execute(NodeChange.__table__.insert(), rows)
    await _prune(session, [(c, seq) for c, seq, _ in upserts if _over_bound(c, seq)])


def _over_bound(cluster: Cluster, seq: int) -> bool:
    return (
        seq - cluster.node_changes_floor > 2 * KEPT_SEQS
        and cluster.node_changes_nodes > 2 * kept_nodes(cluster)
    )


async def _prune(session: AsyncSession, logs: list[tuple[Cluster, int]]) -> None:
    """Raise each cluster's floor (at `seq`, the sequence just logged) until its log holds at
    most `kept_nodes`, or only its newest `KEPT_SEQS` sequences; delete the rows below."""
    if not logs:
        return
    rows = await session.execute(
        select(NodeChange.cluster_id, NodeChange.seq, NodeChange.node_count)
        .where(NodeChange.cluster_id.in_([cluster.id for cluster, _ in logs]))
        .order_by(NodeChange.cluster_id, NodeChange.seq.desc())
    )
    newest_first: dict[uuid.UUID, list[tuple[int, int]]] = {}
    for cluster_id, seq, count in rows:
        newest_first.setdefault(cluster_id, []).append((seq, count))
    pruned: list[ColumnElement[bool]] = []
    for cluster, seq in logs:
        floor, held = _floor_for(
            newest_first.get(cluster.id, []), seq, kept_nodes(cluster), cluster.node_changes_floor
        )
        cluster.node_changes_floor, cluster.node_changes_nodes = floor, held
        pruned.append(and_(NodeChange.cluster_id == cluster.id, NodeChange.seq <= floor))
    await session.execute(delete(NodeChange).where(or_(*pruned)))


def _floor_for(
    newest_first: list[tuple[int, int]], seq: int, kept: int, floor_before: int
) -> tuple[int, int]:
    """(the new floor, the nodes the rows above it hold) of a log whose rows are
    (sequence, node count), newest first, whose newest sequence is `seq` and whose floor was
    `floor_before` (it never goes lower: the log covers nothing below)."""
    floor, held = max(seq - KEPT_SEQS, floor_before), 0
    for row_seq, count in newest_first:
        if row_seq > floor:
            held += count
        elif row_seq > floor_before and held + count <= kept:
            floor, held = row_seq - 1, held + count
        else:
            break
    return floor, held


def store_seq(cluster: Cluster, seq: int) -> None:
    """Store the cluster's applied sequence; the log keeps covering it if it covered the last."""
    if cluster.node_changes_seq == cluster.inventory_seq:
        cluster.node_changes_seq = seq
    cluster.inventory_seq = seq


async def restart_log(session: AsyncSession, cluster: Cluster, seq: int) -> None:
    """A snapshot at `seq` replaced the cluster's nodes: its log starts again from `seq`."""
    await session.execute(delete(NodeChange).where(NodeChange.cluster_id == cluster.id))
    cluster.node_changes_floor = cluster.node_changes_seq = seq
    cluster.node_changes_nodes = 0


async def logged_since(
    session: AsyncSession, since: Mapping[uuid.UUID, int]
) -> list[tuple[uuid.UUID, list[LoggedNode]]]:
    """(cluster id, the nodes a row logged) of the log's rows above `since[cluster]`, in the
    order they were written: a node's last values come last."""
    above = (and_(NodeChange.cluster_id == c, NodeChange.seq > s) for c, s in since.items())
    rows = await session.execute(
        select(NodeChange.cluster_id, NodeChange.nodes).where(or_(*above)).order_by(NodeChange.seq)
    )
    return [(cluster_id, nodes) for cluster_id, nodes in rows]


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
