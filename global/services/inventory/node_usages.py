"""A delta's node usages: what the pods of nodes the cluster holds use, for nodes whose usage
alone changed (the most common change: pods come and go). Applied from the stored node's other
columns, which the delta writer reads anyway, so a usage carries and writes four values where
an upsert carries the whole node (its labels and taints included).

A usage for a node the cluster does not hold (the agent's view and the Global's parted ways)
is refused as `StaleUsage`, before anything of its run is written: the agent is asked for a
snapshot, which sets both views alike again."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from volcano_global.errors import Conflict, Invalid
from volcano_global.schemas.clusters import NodeIn
from volcano_global.services.inventory.node_changes import LoggedNode
from volcano_global.services.inventory.node_values import CheckedDelta, NodeUsage, NodeValues
from volcano_global.services.inventory.snapshots import UNKNOWN_GPU_MODEL

Change = dict[str, list[int]]  # GPU model -> [total, free] added to the cluster's aggregate

# The columns the UPDATE of a node's usage sets and matches on, and on Postgres the composite
# type of those columns in this order (migrations/versions/0037).
USAGE_UPDATED = ("name", "gpu_used", "cpu_used_millis", "memory_used_bytes", "seq", "cluster_id")
USAGE_TYPE = "node_usage"


class StaleUsage(Conflict):
    """A usage names a node the cluster does not hold: the agent must resync."""

    def __init__(self, name: str) -> None:
        super().__init__(f"node {name!r} is not in the inventory: send a snapshot")
        self.name = name


def fold(nodes: dict[str, NodeValues | NodeUsage | None], usage: NodeUsage) -> None:
    """Merge a usage into `nodes` (name -> a run's last change of the node: its upsert, its
    usage, None: removed), as a later delta's: an upsert earlier in the run takes it."""
    earlier = nodes.get(usage.name, usage)
    if earlier is None:
        raise StaleUsage(usage.name)
    if isinstance(earlier, NodeValues):
        _require_within(usage, earlier.gpu_allocatable, "nodeUsages")
        nodes[usage.name] = earlier._replace(
            gpu_used=usage.gpu_used,
            cpu_used_millis=usage.cpu_used_millis,
            memory_used_bytes=usage.memory_used_bytes,
        )
        return
    nodes[usage.name] = usage


def require_known(deltas: list[CheckedDelta], stored: set[str]) -> None:
    """Each delta's usages name nodes held after the deltas before it (`stored`: the nodes
    held before the first); raises StaleUsage for the first that does not."""
    held = set(stored)
    for delta in deltas:
        held.difference_update(delta.node_removals)
        held.update(n.name for n in delta.node_upserts)
        for usage in delta.node_usages:
            if usage.name not in held:
                raise StaleUsage(usage.name)


def usage_changes(
    usages: list[NodeUsage],
    existing: Mapping[str, Mapping[str, Any]],
    *,
    seq: int,
    cluster_id: uuid.UUID,
) -> tuple[Change, bool, list[tuple[Any, ...]], list[LoggedNode]]:
    """For usages of stored nodes (`existing`, by name: rows with the capacity columns):
    what they change in the cluster's aggregates (free GPUs only: `contribution`'s rule),
    whether free GPUs rose, the rows for `USAGE_UPDATED` and the nodes as the change log holds
    them. Written out rather than through `contribution` twice a node: this runs for every
    usage an agent sends."""
    change: Change = defaultdict(lambda: [0, 0])
    freed = False
    rows, logged = [], []
    domains: dict[Any, str | None] = {}  # a domain's id as the log writes it
    for usage in usages:
        row = existing[usage.name]
        allocatable, used, ready, schedulable = (
            row["gpu_allocatable"],
            usage.gpu_used,
            row["ready"],
            row["schedulable"],
        )
        if used > allocatable:
            _refuse_above(usage, allocatable)
        if allocatable and ready and schedulable and used != (old := row["gpu_used"]):
            gained = max(allocatable - used, 0) - max(allocatable - old, 0)
            change[row["gpu_model"] or UNKNOWN_GPU_MODEL][1] += gained
            freed = freed or gained > 0
        rows.append((*usage, seq, cluster_id))
        domain_id = row["domain_id"]
        if domain_id not in domains:
            domains[domain_id] = None if domain_id is None else str(domain_id)
        model = row["gpu_model"]
        logged.append(
            [usage.name, domains[domain_id], model, allocatable, used, ready, schedulable]
        )
    return change, freed, rows, logged


def apply_to_models(nodes: dict[str, NodeIn], usages: list[NodeUsage]) -> None:
    """Set the usages on the nodes they name (a HyperNode change rebuilds the inventory)."""
    for usage in usages:
        node = nodes.get(usage.name)
        if node is None:
            raise StaleUsage(usage.name)
        _require_within(usage, node.gpu_allocatable, "nodeUsages")
        nodes[usage.name] = node.model_copy(
            update={
                "gpu_used": usage.gpu_used,
                "cpu_used_millis": usage.cpu_used_millis,
                "memory_used_bytes": usage.memory_used_bytes,
            }
        )


def _require_within(usage: NodeUsage, allocatable: int, field: str) -> None:
    if usage.gpu_used > allocatable:
        _refuse_above(usage, allocatable, field)


def _refuse_above(usage: NodeUsage, allocatable: int, field: str = "nodeUsages") -> None:
    raise Invalid.one(
        f"{field}.gpuUsed",
        f"node {usage.name!r}: {usage.gpu_used} GPUs used exceed its {allocatable} allocatable",
    )
