"""Applying an agent's inventory delta: node and HyperNode changes, with the cluster's GPU
aggregates (by model) adjusted by the difference instead of recomputed."""

from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.base import utcnow
from volcano_global.db.bulk import add_to_rows
from volcano_global.db.models import (
    NODE_USE,
    Cluster,
    ClusterGpuCapacity,
    Node,
    NodeUse,
    TopologyDomain,
)
from volcano_global.db.parts import parts
from volcano_global.errors import Invalid, field_error
from volcano_global.schemas.clusters import DomainIn, InventoryDelta, InventorySnapshot, NodeIn
from volcano_global.services.inventory import node_cache
from volcano_global.services.inventory.domain_trees import DomainTree, domain_trees
from volcano_global.services.inventory.node_cap import require_node_cap, require_room_for
from volcano_global.services.inventory.node_changes import LoggedNode, log_upserts, store_seq
from volcano_global.services.inventory.node_rows import NodeRows
from volcano_global.services.inventory.node_usages import (
    Change,
    StaleUsage,
    apply_to_models,
    fold,
    usage_changes,
)
from volcano_global.services.inventory.node_values import (
    CheckedDelta,
    NodeUsage,
    NodeValues,
    checked_delta,
    node_model,
)
from volcano_global.services.inventory.snapshots import (
    contribution,
    replace_inventory,
)
from volcano_global.services.inventory.stored_nodes import (
    NAMES_A_STATEMENT,
    StoredRow,
    stored_nodes,
)
from volcano_global.services.wakeups import room_may_have_changed


@dataclass(frozen=True)
class ClusterDelta:
    """A node-only delta (no HyperNode change) for one cluster, stamped `seq`."""

    cluster: Cluster
    delta: CheckedDelta
    seq: int


async def apply_delta(
    session: AsyncSession,
    *,
    cluster: Cluster,
    delta: InventoryDelta | CheckedDelta,
    seq: int,
    max_nodes: int | None = None,
) -> None:
    """Apply the delta in the caller's transaction. A HyperNode change re-reads the whole
    inventory (rare); node changes adjust the aggregates by their difference (the cluster's
    loaded `capacities` are not refreshed). The cluster may hold at most `max_nodes` nodes
    after it (TooLarge; None: no cap)."""
    delta = checked_delta(delta)
    if delta.domain_upserts or delta.domain_removals:
        await _with_domain_changes(session, cluster=cluster, delta=delta, seq=seq, cap=max_nodes)
        return
    stale = await apply_node_deltas(
        session, [ClusterDelta(cluster, delta, seq)], max_nodes=max_nodes
    )
    if stale:
        raise stale[0][1]


async def apply_node_deltas(
    session: AsyncSession, deltas: list[ClusterDelta], *, max_nodes: int | None = None
) -> list[tuple[ClusterDelta, StaleUsage]]:
    """Apply node-only deltas of distinct clusters in the caller's transaction, together: on
    Postgres one read of the stored nodes they name, one UPDATE of whole nodes and one of
    usages (`node_usages`), one INSERT of new nodes and one of their usages, one upsert of
    the clusters' aggregates for all of them (the statements' fixed cost, not the rows, was
    most of a small delta's). A delta with a usage of a node its cluster does not hold is not
    applied: it is answered, with why."""
    trees = await domain_trees(
        session, {d.cluster.id: d.cluster.inventory_generation for d in deltas}
    )
    _refuse_unknown_domains(deltas, trees, max_nodes)
    stored = await _stored(session, deltas)
    stale = _stale(deltas, stored)
    if stale:
        refused = {id(d) for d, _ in stale}
        deltas = [d for d in deltas if id(d) not in refused]
    now = utcnow()
    rows = NodeRows()
    changes: dict[uuid.UUID, tuple[Change, bool]] = {}
    logged: list[tuple[Cluster, int, list[LoggedNode]]] = []
    for d in deltas:
        cluster, tree, existing = d.cluster, trees[d.cluster.id], stored.get(d.cluster.id, {})
        changes[cluster.id] = _change(tree, existing, d.delta)
        _count_nodes(cluster, existing, d.delta)
        await _remove(session, cluster, d.delta.node_removals, d.seq)
        written: list[LoggedNode] = []
        logged.append((cluster, d.seq, written))
        if d.delta.node_usages:
            change, freed, usages, usages_logged = usage_changes(
                d.delta.node_usages, existing, seq=d.seq, cluster_id=cluster.id
            )
            changes[cluster.id] = _sum(changes[cluster.id], (change, freed))
            rows.usages += usages
            written += usages_logged
        added = 0
        for node in d.delta.node_upserts:
            domain_id = tree.ids[node.domain] if node.domain else None
            written.append(_logged(node, domain_id))
            added += rows.upsert(
                node, cluster.id, d.seq, domain_id, stored=node.name in existing, now=now
            )
        await require_room_for(
            session, cluster_id=cluster.id, cluster=cluster.name, added=added, cap=max_nodes
        )
    await rows.write(session, now)
    await _apply_changes(session, {cluster_id: gpus for cluster_id, (gpus, _) in changes.items()})
    if any(freed for _, freed in changes.values()):
        room_may_have_changed(session)  # e.g. a job's pods gone
    await log_upserts(session, logged)
    if node_cache.caches(session):
        _keep_stored(session, deltas, stored, trees)
    for d in deltas:
        d.cluster.inventory_updated_at = now
        store_seq(d.cluster, d.seq)
    await session.flush()
    return stale


async def _stored(
    session: AsyncSession, deltas: list[ClusterDelta]
) -> dict[uuid.UUID, dict[str, StoredRow]]:
    """The stored rows of the nodes each delta names, by cluster id and name: the cached rows
    of a cluster where `node_cache` has them (every row it holds of the cluster: a superset),
    the others read."""
    if not node_cache.caches(session):
        return await stored_nodes(session, {d.cluster.id: _named(d.delta) for d in deltas})
    found: dict[uuid.UUID, dict[str, StoredRow]] = {}
    missing: dict[uuid.UUID, list[str]] = {}
    for d in deltas:
        rows = found[d.cluster.id] = node_cache.take(d.cluster) or {}
        if unread := [name for name in _named(d.delta) if name not in rows]:
            missing[d.cluster.id] = unread
    if missing:
        for cluster_id, read in (await stored_nodes(session, missing)).items():
            found[cluster_id].update(read)
    return found


def _keep_stored(
    session: AsyncSession,
    deltas: list[ClusterDelta],
    stored: dict[uuid.UUID, dict[str, Any]],
    trees: dict[uuid.UUID, DomainTree],
) -> None:
    """Each applied delta's cluster's rows (`_stored`) changed as the delta wrote its nodes,
    cached once the transaction commits."""
    for d in deltas:
        rows, ids = stored[d.cluster.id], trees[d.cluster.id].ids
        for name in d.delta.node_removals:
            rows.pop(name, None)
        for usage in d.delta.node_usages:
            rows[usage.name]["gpu_used"] = usage.gpu_used
        for node in d.delta.node_upserts:
            rows[node.name] = {
                "name": node.name,
                "domain_id": ids[node.domain] if node.domain else None,
                "gpu_model": node.gpu_model,
                "gpu_allocatable": node.gpu_allocatable,
                "gpu_used": node.gpu_used,
                "ready": node.ready,
                "schedulable": node.schedulable,
            }
        node_cache.keep(session, d.cluster, d.seq, rows)


def _named(delta: CheckedDelta) -> list[str]:
    """The nodes a delta names (upserted, removed, or their usage)."""
    return (
        [n.name for n in delta.node_upserts]
        + list(delta.node_removals)
        + [u.name for u in delta.node_usages]
    )


def _stale(
    deltas: list[ClusterDelta], stored: dict[uuid.UUID, dict[str, StoredRow]]
) -> list[tuple[ClusterDelta, StaleUsage]]:
    """The deltas with a usage of a node their cluster does not hold (upserts and removals of
    the same delta name other nodes: the schema refuses a node named twice)."""
    stale = []
    for d in deltas:
        existing = stored.get(d.cluster.id, {})
        for usage in d.delta.node_usages:
            if usage.name not in existing:
                stale.append((d, StaleUsage(usage.name)))
                break
    return stale


def _sum(a: tuple[Change, bool], b: tuple[Change, bool]) -> tuple[Change, bool]:
    """Two changes of a cluster's aggregates as one (and whether either freed GPUs)."""
    change: Change = defaultdict(lambda: [0, 0])
    for part in (a[0], b[0]):
        for model, (total, free) in part.items():
            change[model][0] += total
            change[model][1] += free
    return change, a[1] or b[1]


async def _remove(session: AsyncSession, cluster: Cluster, names: list[str], seq: int) -> None:
    """Delete the cluster's nodes of these names (a removal marks the cluster's sequence: the
    scheduler's view then reads the cluster whole)."""
    if not names:
        return
    for part in parts(list(set(names)), NAMES_A_STATEMENT):
        for table in (Node, NodeUse):
            await session.execute(
                delete(table).where(table.cluster_id == cluster.id, table.name.in_(part))
            )
    cluster.nodes_removed_seq = seq


def _refuse_unknown_domains(
    deltas: list[ClusterDelta], trees: dict[uuid.UUID, DomainTree], max_nodes: int | None
) -> None:
    """Before anything is read or written: a node under a domain its cluster does not have,
    or more nodes upserted than a cluster may hold."""
    for d in deltas:
        domains = trees[d.cluster.id].ids
        for i, node in enumerate(d.delta.node_upserts):
            if node.domain is not None and node.domain not in domains:
                raise Invalid.one(f"nodeUpserts[{i}].domain", f"unknown domain {node.domain!r}")
    for d in deltas:  # every upserted node is there after the delta: no read needed to refuse
        require_node_cap(d.cluster.name, len(d.delta.node_upserts), max_nodes)


def _logged(node: NodeValues, domain_id: uuid.UUID | None) -> LoggedNode:
    """The node as the change log holds it (`node_changes.LOGGED`)."""
    domain = None if domain_id is None else str(domain_id)
    return [node.name, domain, *node[1:4], node.ready, node.schedulable]


def _change(
    tree: DomainTree, existing: dict[str, StoredRow], delta: CheckedDelta
) -> tuple[Change, bool]:
    """What the delta changes in the cluster's aggregates: (total, free) GPUs by model, the
    stored nodes it names taken out and its upserts put in; and whether free GPUs rose
    anywhere (a node's in its domain: a move between domains counts, as a waiting job may
    need the room where it went). Nothing per domain is kept: the topology view sums a
    cluster's nodes when asked (`fleet_views._node_sums`)."""
    change: Change = defaultdict(lambda: [0, 0])
    freed = False
    for node in delta.node_upserts:
        new, row = _node_part(node), existing.get(node.name)
        old = None if row is None else _row_part(row)
        if not freed and new is not None and new[2]:
            freed = (
                row is None
                or old is None
                or old[0] != new[0]
                or old[2] < new[2]
                or row["domain_id"] != (tree.ids[node.domain] if node.domain else None)
            )
        if old == new:  # most changes move no GPU the aggregate counts
            continue
        if old is not None:
            entry = change[old[0]]
            entry[0] -= old[1]
            entry[1] -= old[2]
        if new is not None:
            entry = change[new[0]]
            entry[0] += new[1]
            entry[1] += new[2]
    for name in delta.node_removals:  # never also upserted (the schema refuses it)
        if (row := existing.get(name)) is not None and (old := _row_part(row)) is not None:
            entry = change[old[0]]
            entry[0] -= old[1]
            entry[1] -= old[2]
    return change, freed


def _count_nodes(cluster: Cluster, existing: dict[str, StoredRow], delta: CheckedDelta) -> None:
    """Keep the cluster's node counts in step with the delta (what the cluster list shows):
    its new nodes and removed stored ones counted, a stored node's readiness changed."""
    total = ready = 0
    for node in delta.node_upserts:
        row = existing.get(node.name)
        total += row is None
        ready += int(node.ready) - (int(row["ready"]) if row is not None else 0)
    for name in delta.node_removals:
        if (row := existing.get(name)) is not None:
            total -= 1
            ready -= int(row["ready"])
    cluster.nodes_total += total
    cluster.nodes_ready += ready


def merged(deltas: list[CheckedDelta]) -> list[CheckedDelta]:
    """Consecutive node-only deltas as one (each node's last change wins; within a delta,
    removals come before upserts, as `apply_delta` applies them); a delta that changes
    HyperNodes stays on its own."""
    out: list[CheckedDelta] = []
    # name -> its last upsert or usage, None: removed
    nodes: dict[str, NodeValues | NodeUsage | None] = {}

    def close() -> None:
        if nodes:
            values = nodes.values()
            out.append(
                CheckedDelta(
                    node_upserts=[n for n in values if isinstance(n, NodeValues)],
                    node_removals=[name for name, n in nodes.items() if n is None],
                    node_usages=[n for n in values if isinstance(n, NodeUsage)],
                )
            )
            nodes.clear()

    for delta in deltas:
        if delta.domain_upserts or delta.domain_removals:
            close()
            out.append(delta)
            continue
        nodes.update(dict.fromkeys(delta.node_removals))
        nodes.update({n.name: n for n in delta.node_upserts})
        for usage in delta.node_usages:
            fold(nodes, usage)
    close()
    return out


async def _with_domain_changes(
    session: AsyncSession, *, cluster: Cluster, delta: CheckedDelta, seq: int, cap: int | None
) -> None:
    """Rebuild the snapshot the delta leads to and replace the inventory with it."""
    domain_rows = (
        await session.execute(select(TopologyDomain).where(TopologyDomain.cluster_id == cluster.id))
    ).scalars()
    by_id = {d.id: d for d in domain_rows}
    domains = {
        d.name: DomainIn(
            name=d.name,
            tier=d.tier,
            tier_name=d.tier_name,
            parent=by_id[d.parent_id].name if d.parent_id in by_id else None,
        )
        for d in by_id.values()
    }
    for name in delta.domain_removals:
        domains.pop(name, None)
    domains.update({d.name: d for d in delta.domain_upserts})
    # An outer join: a node without its usage row (never written so) is kept, as using nothing.
    node_rows = await session.execute(
        select(Node, NodeUse).outerjoin(NodeUse, NODE_USE).where(Node.cluster_id == cluster.id)
    )
    nodes = {
        n.name: NodeIn(
            name=n.name,
            gpu_model=n.gpu_model,
            gpu_allocatable=n.gpu_allocatable,
            gpu_used=u.gpu_used if u else 0,
            cpu_allocatable_millis=n.cpu_allocatable_millis,
            cpu_used_millis=u.cpu_used_millis if u else 0,
            memory_allocatable_bytes=n.memory_allocatable_bytes,
            memory_used_bytes=u.memory_used_bytes if u else 0,
            ready=n.ready,
            schedulable=n.schedulable,
            domain=by_id[n.domain_id].name if n.domain_id in by_id else None,
            labels=n.labels,
            taints=n.taints,
        )
        for n, u in node_rows
    }
    for name in delta.node_removals:
        nodes.pop(name, None)
    nodes.update({n.name: node_model(n) for n in delta.node_upserts})
    apply_to_models(nodes, delta.node_usages)
    for node in nodes.values():
        if node.domain is not None and node.domain not in domains:
            node.domain = None  # its domain was removed
    require_node_cap(cluster.name, len(nodes), cap)
    snapshot = _inventory_after(list(domains.values()), list(nodes.values()))
    await replace_inventory(session, cluster=cluster, snapshot=snapshot, seq=seq)


def _inventory_after(domains: list[DomainIn], nodes: list[NodeIn]) -> InventorySnapshot:
    """The inventory a HyperNode change leads to, checked as a snapshot is (a domain whose
    parent is unknown or not above it): a refusal names the field, not a traceback."""
    try:
        return InventorySnapshot(domains=domains, nodes=nodes)
    except ValidationError as exc:
        errors = exc.errors()[:20]
        raise Invalid([field_error(e["loc"], e["msg"], prefix="delta") for e in errors]) from None


def _row_part(row: StoredRow) -> tuple[str, int, int] | None:
    return contribution(
        gpu_model=row["gpu_model"],
        gpu_allocatable=row["gpu_allocatable"],
        gpu_used=row["gpu_used"],
        ready=row["ready"],
        schedulable=row["schedulable"],
    )


def _node_part(node: NodeValues) -> tuple[str, int, int] | None:
    return contribution(
        gpu_model=node.gpu_model,
        gpu_allocatable=node.gpu_allocatable,
        gpu_used=node.gpu_used,
        ready=node.ready,
        schedulable=node.schedulable,
    )


async def _apply_changes(session: AsyncSession, changes: dict[uuid.UUID, Change]) -> None:
    """Add each cluster's differences to its aggregates, creating rows that do not exist yet:
    one upsert statement for all clusters, in key order (no read, no ORM objects)."""
    rows = [
        {"cluster_id": cluster_id, "gpu_model": m, "total_gpus": t, "free_gpus": f}
        for cluster_id, change in changes.items()
        for m, (t, f) in change.items()
        if t or f
    ]
    rows.sort(key=lambda r: (str(r["cluster_id"]), r["gpu_model"]))
    await add_to_rows(
        session,
        ClusterGpuCapacity.__table__,
        rows,
        keys=("cluster_id", "gpu_model"),
        added=("total_gpus", "free_gpus"),
    )
