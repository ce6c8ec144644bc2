"""Applying an agent's inventory delta: node and HyperNode changes, with the per-domain and
per-cluster GPU aggregates adjusted by the difference instead of recomputed."""

from __future__ import annotations

import uuid
from collections import defaultdict
from typing import Any

from pydantic import ValidationError
from sqlalchemy import any_, bindparam, delete, select
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.base import utcnow
from volcano_global.db.bulk import add_to_rows, update_rows
from volcano_global.db.fast_reads import Read
from volcano_global.db.models import (
    Cluster,
    ClusterGpuCapacity,
    DomainGpuCapacity,
    Node,
    TopologyDomain,
)
from volcano_global.errors import Invalid, field_error
from volcano_global.schemas.clusters import DomainIn, InventoryDelta, InventorySnapshot, NodeIn
from volcano_global.services.inventory.domain_trees import domain_trees
from volcano_global.services.inventory.node_cap import require_node_cap, require_room_for
from volcano_global.services.inventory.node_values import (
    CheckedDelta,
    NodeValues,
    checked_delta,
    node_model,
)
from volcano_global.services.inventory.snapshots import (
    NODE_CAPACITY_COLUMNS,
    contribution,
    insert_many,
    replace_inventory,
)
from volcano_global.services.wakeups import room_may_have_changed

Key = tuple[uuid.UUID | None, str]  # (domain id or None for the cluster, GPU model)


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
    tree = (await domain_trees(session, {cluster.id: cluster.inventory_generation}))[cluster.id]
    domains = tree.ids
    for i, node in enumerate(delta.node_upserts):
        if node.domain is not None and node.domain not in domains:
            raise Invalid.one(f"nodeUpserts[{i}].domain", f"unknown domain {node.domain!r}")
    names = [n.name for n in delta.node_upserts] + list(delta.node_removals)
    existing = {
        row["name"]: row
        for row in await _EXISTING.rows(session, {"cluster_id": cluster.id, "names": names})
    }
    change: dict[Key, list[int]] = defaultdict(lambda: [0, 0])

    def account(part: tuple[str, int, int] | None, domain_id: uuid.UUID | None, sign: int) -> None:
        if part is None:
            return
        model, total, free = part
        for key_domain in [None, *tree.chain(domain_id)]:
            entry = change[(key_domain, model)]
            entry[0] += sign * total
            entry[1] += sign * free

    for row in existing.values():
        account(_row_part(row), row["domain_id"], -1)
    for node in delta.node_upserts:
        account(_node_part(node), domains[node.domain] if node.domain else None, +1)

    if delta.node_removals:
        await session.execute(
            delete(Node).where(Node.cluster_id == cluster.id, Node.name.in_(delta.node_removals))
        )
        cluster.nodes_removed_seq = seq
    now = utcnow()
    updates, inserts = [], []
    for node in delta.node_upserts:
        values = node._asdict()
        domain = values.pop("domain")
        values["domain_id"] = domains[domain] if domain else None
        if node.name in existing:
            updates.append(values)  # found by name (the cluster's names are unique)
        else:
            extra = {"id": uuid.uuid4(), "cluster_id": cluster.id, "updated_at": now, "seq": seq}
            inserts.append(values | extra)
    await update_rows(
        session,
        Node.__table__,
        updates,
        key="name",
        where={"cluster_id": cluster.id},
        values={"updated_at": now, "seq": seq},
    )
    await require_room_for(
        session, cluster_id=cluster.id, cluster=cluster.name, added=len(inserts), cap=max_nodes
    )
    await insert_many(session, Node, inserts)
    await _apply_change(session, cluster.id, change)
    if any(free > 0 for _, free in change.values()):  # e.g. a job's pods gone
        room_may_have_changed(session)
    cluster.inventory_updated_at = now
    cluster.inventory_seq = seq
    await session.flush()


def merged(deltas: list[CheckedDelta]) -> list[CheckedDelta]:
    """Consecutive node-only deltas as one (each node's last change wins; within a delta,
    removals come before upserts, as `apply_delta` applies them); a delta that changes
    HyperNodes stays on its own."""
    out: list[CheckedDelta] = []
    nodes: dict[str, NodeValues | None] = {}  # name -> its last upsert, None: removed

    def close() -> None:
        if nodes:
            out.append(
                CheckedDelta(
                    node_upserts=[n for n in nodes.values() if n is not None],
                    node_removals=[name for name, n in nodes.items() if n is None],
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
    node_rows = (await session.execute(select(Node).where(Node.cluster_id == cluster.id))).scalars()
    nodes = {
        n.name: NodeIn(
            name=n.name,
            gpu_model=n.gpu_model,
            gpu_allocatable=n.gpu_allocatable,
            gpu_used=n.gpu_used,
            cpu_allocatable_millis=n.cpu_allocatable_millis,
            cpu_used_millis=n.cpu_used_millis,
            memory_allocatable_bytes=n.memory_allocatable_bytes,
            memory_used_bytes=n.memory_used_bytes,
            ready=n.ready,
            schedulable=n.schedulable,
            domain=by_id[n.domain_id].name if n.domain_id in by_id else None,
            labels=n.labels,
            taints=n.taints,
        )
        for n in node_rows
    }
    for name in delta.node_removals:
        nodes.pop(name, None)
    nodes.update({n.name: node_model(n) for n in delta.node_upserts})
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


def _row_part(row: dict[str, Any]) -> tuple[str, int, int] | None:
    return contribution(
        gpu_model=row["gpu_model"],
        gpu_allocatable=row["gpu_allocatable"],
        gpu_used=row["gpu_used"],
        ready=row["ready"],
        schedulable=row["schedulable"],
    )


# The stored state of the nodes a delta names (read on the driver's connection; on Postgres
# the names go as one array parameter).
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


def _node_part(node: NodeValues) -> tuple[str, int, int] | None:
    return contribution(
        gpu_model=node.gpu_model,
        gpu_allocatable=node.gpu_allocatable,
        gpu_used=node.gpu_used,
        ready=node.ready,
        schedulable=node.schedulable,
    )


async def _apply_change(
    session: AsyncSession, cluster_id: uuid.UUID, change: dict[Key, list[int]]
) -> None:
    """Add the differences to the aggregates, creating rows that do not exist yet: one upsert
    statement per table, in key order (no read, no ORM objects)."""
    change = {k: v for k, v in sorted(change.items(), key=_key_order) if v[0] or v[1]}
    clusters = [
        {"cluster_id": cluster_id, "gpu_model": m, "total_gpus": t, "free_gpus": f}
        for (d, m), (t, f) in change.items()
        if d is None
    ]
    domains = [
        {"domain_id": d, "gpu_model": m, "total_gpus": t, "free_gpus": f}
        for (d, m), (t, f) in change.items()
        if d is not None
    ]
    for model, rows, keys in (
        (ClusterGpuCapacity, clusters, ("cluster_id", "gpu_model")),
        (DomainGpuCapacity, domains, ("domain_id", "gpu_model")),
    ):
        await add_to_rows(
            session, model.__table__, rows, keys=keys, added=("total_gpus", "free_gpus")
        )


def _key_order(item: tuple[Key, list[int]]) -> tuple[str, str]:
    (domain_id, model), _ = item
    return (str(domain_id) if domain_id else "", model)
