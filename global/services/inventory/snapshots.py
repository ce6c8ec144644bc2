"""A cluster's inventory: replacing it from a snapshot, and its aggregates (total and free
GPUs by model per cluster: the cluster list, the overview, the metrics)."""

from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import dataclass, field

from sqlalchemy import delete, insert
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.base import utcnow
from volcano_global.db.copy_rows import insert_columns, insert_tuples
from volcano_global.db.models import Cluster, ClusterGpuCapacity, Node, NodeUse, TopologyDomain
from volcano_global.db.parts import parts
from volcano_global.schemas.clusters import InventorySnapshot
from volcano_global.services.inventory import node_cache
from volcano_global.services.inventory.domain_trees import mark_replaced
from volcano_global.services.inventory.node_cap import require_node_cap
from volcano_global.services.inventory.node_changes import restart_log
from volcano_global.services.inventory.node_values import (
    STORED,
    USED,
    CheckedSnapshot,
    NodeValues,
    checked_snapshot,
)
from volcano_global.services.wakeups import room_may_have_changed

UNKNOWN_GPU_MODEL = "unknown"
# What a node adds to free capacity (`contribution`, the schedulers' histograms).
NODE_CAPACITY_COLUMNS = (
    Node.domain_id,
    Node.gpu_model,
    Node.gpu_allocatable,
    NodeUse.gpu_used,
    Node.ready,
    Node.schedulable,
)
_BATCH = 2000


@dataclass
class GpuTally:
    total: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    free: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def add(self, model: str, total: int, free: int) -> None:
        self.total[model] += total
        self.free[model] += free


def contribution(
    *, gpu_model: str | None, gpu_allocatable: int, gpu_used: int, ready: bool, schedulable: bool
) -> tuple[str, int, int] | None:
    """(model, total, free) a node adds to its domains and cluster; None for a GPU-less node.
    Free GPUs count only on ready, schedulable nodes (the topology view's sums in SQL follow
    the same rule: `fleet_views._FREE_GPUS`)."""
    if gpu_allocatable == 0:
        return None
    free = gpu_allocatable - gpu_used if ready and schedulable else 0
    return gpu_model or UNKNOWN_GPU_MODEL, gpu_allocatable, max(free, 0)


async def replace_inventory(
    session: AsyncSession,
    *,
    cluster: Cluster,
    snapshot: InventorySnapshot | CheckedSnapshot,
    seq: int | None = None,
    max_nodes: int | None = None,
) -> Cluster:
    """Replace everything the Global holds about the cluster's nodes and topology, in the
    caller's transaction (nothing is half-applied), and bump the inventory generation. More
    than `max_nodes` nodes are refused (TooLarge; None: no cap)."""
    snapshot = checked_snapshot(snapshot)
    require_node_cap(cluster.name, len(snapshot.nodes), max_nodes)
    mark_replaced(session, cluster.id)
    node_cache.forget(session, cluster.id)
    room_may_have_changed(session)
    await session.execute(delete(Node).where(Node.cluster_id == cluster.id))
    await session.execute(delete(NodeUse).where(NodeUse.cluster_id == cluster.id))
    await session.execute(delete(TopologyDomain).where(TopologyDomain.cluster_id == cluster.id))
    await session.execute(
        delete(ClusterGpuCapacity).where(ClusterGpuCapacity.cluster_id == cluster.id)
    )
    domain_ids = {d.name: uuid.uuid4() for d in snapshot.domains}
    # Parents before children, so the self-referencing foreign key holds row by row.
    ordered = sorted(snapshot.domains, key=lambda d: -d.tier)
    await insert_tuples(
        session,
        TopologyDomain.__table__,
        ("id", "name", "tier", "tier_name", "parent_id"),
        [
            (domain_ids[d.name], d.name, d.tier, d.tier_name, domain_ids.get(d.parent or ""))
            for d in ordered
        ],
        constants={"cluster_id": cluster.id},
        new_ids=False,
    )
    stored_seq = seq if seq is not None else cluster.inventory_seq
    await restart_log(session, cluster, stored_seq)
    await _insert_nodes(session, cluster.id, snapshot.nodes, domain_ids, stored_seq)
    await _insert_tally(session, cluster.id, _tally(snapshot.nodes))
    cluster.nodes_total = len(snapshot.nodes)
    cluster.nodes_ready = sum(1 for n in snapshot.nodes if n.ready)
    cluster.inventory_generation += 1
    cluster.inventory_updated_at = utcnow()
    cluster.inventory_seq = stored_seq
    await session.flush()
    await session.refresh(cluster, ["capacities"])
    return cluster


async def _insert_nodes(
    session: AsyncSession,
    cluster_id: uuid.UUID,
    nodes: list[NodeValues],
    domain_ids: dict[str, uuid.UUID],
    seq: int,
) -> None:
    """The nodes' rows and their usages' rows, given to the database by column (no tuple
    built per node)."""
    if not nodes:
        return
    columns = dict(zip(NodeValues._fields, zip(*nodes, strict=True), strict=True))
    await insert_columns(
        session,
        Node.__table__,
        {
            **{c: columns[c] for c in STORED},
            "domain_id": [domain_ids.get(d) for d in columns["domain"]],
        },
        constants={"cluster_id": cluster_id, "updated_at": utcnow(), "seq": seq},
    )
    await insert_columns(
        session,
        NodeUse.__table__,
        {c: columns[c] for c in ("name", *USED)},
        constants={"cluster_id": cluster_id, "seq": seq},
        new_ids=False,
    )


def _tally(nodes: list[NodeValues]) -> GpuTally:
    """What the nodes add to the cluster's aggregates."""
    tally = GpuTally()
    for node in nodes:
        part = contribution(
            gpu_model=node.gpu_model,
            gpu_allocatable=node.gpu_allocatable,
            gpu_used=node.gpu_used,
            ready=node.ready,
            schedulable=node.schedulable,
        )
        if part is not None:
            tally.add(*part)
    return tally


async def _insert_tally(session: AsyncSession, cluster_id: uuid.UUID, tally: GpuTally) -> None:
    await insert_many(
        session,
        ClusterGpuCapacity,
        [
            {"cluster_id": cluster_id, "gpu_model": m, "total_gpus": t, "free_gpus": tally.free[m]}
            for m, t in tally.total.items()
        ],
    )


async def insert_many(session: AsyncSession, model: type, rows: list[dict]) -> None:  # type: ignore[type-arg]
    """Core executemany on the table: the ORM's bulk path costs several times more per row."""
    table = model.__table__  # type: ignore[attr-defined]
    for part in parts(rows, _BATCH):
        await session.execute(insert(table), part)
