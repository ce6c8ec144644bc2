"""Checked inventory in the form the database writes take: each node a tuple of its column
values, not a pydantic model. An agent's protocol messages are checked straight into this form
(`grpc/node_checks.py`): building and dumping a model per node was most of what a 5,000-node
snapshot cost the Global (docs/benchmarks.md, "Ingest at 100 x 5,000"). The REST API's
validated models are turned into it too, so both paths write the same way."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from volcano_global.schemas.clusters import DomainIn, InventoryDelta, InventorySnapshot, NodeIn


class NodeValues(NamedTuple):
    """A checked node, its fields named as the Node table's columns and its NodeUse row's
    (the USED ones; `domain` is the name of its domain, the table stores its id; `taints` in
    their stored form)."""

    name: str
    gpu_model: str | None
    gpu_allocatable: int
    gpu_used: int
    cpu_allocatable_millis: int
    cpu_used_millis: int
    memory_allocatable_bytes: int
    memory_used_bytes: int
    ready: bool
    schedulable: bool
    domain: str | None
    labels: dict[str, str]
    taints: list[dict[str, Any]]


# What a node's pods use: the columns of its `node_usages` row (`models.NodeUse`).
USED = ("gpu_used", "cpu_used_millis", "memory_used_bytes")
# The Node columns a NodeValues fills as they are (all but `domain`, stored as `domain_id`,
# and what is USED).
STORED = (*(f for f in NodeValues._fields[:10] if f not in USED), "labels", "taints")


class NodeUsage(NamedTuple):
    """A checked usage of a node the cluster holds, its fields named as its NodeUse row's."""

    name: str
    gpu_used: int
    cpu_used_millis: int
    memory_used_bytes: int


@dataclass
class CheckedSnapshot:
    domains: list[DomainIn] = field(default_factory=list)
    nodes: list[NodeValues] = field(default_factory=list)


@dataclass
class CheckedDelta:
    node_upserts: list[NodeValues] = field(default_factory=list)
    node_removals: list[str] = field(default_factory=list)
    domain_upserts: list[DomainIn] = field(default_factory=list)
    domain_removals: list[str] = field(default_factory=list)
    node_usages: list[NodeUsage] = field(default_factory=list)


def node_values(node: NodeIn) -> NodeValues:
    return NodeValues(
        node.name,
        node.gpu_model,
        node.gpu_allocatable,
        node.gpu_used,
        node.cpu_allocatable_millis,
        node.cpu_used_millis,
        node.memory_allocatable_bytes,
        node.memory_used_bytes,
        node.ready,
        node.schedulable,
        node.domain,
        dict(node.labels),
        [t.model_dump(by_alias=True) for t in node.taints],
    )


def checked_snapshot(snapshot: InventorySnapshot | CheckedSnapshot) -> CheckedSnapshot:
    if isinstance(snapshot, CheckedSnapshot):
        return snapshot
    return CheckedSnapshot(list(snapshot.domains), [node_values(n) for n in snapshot.nodes])


def checked_delta(delta: InventoryDelta | CheckedDelta) -> CheckedDelta:
    if isinstance(delta, CheckedDelta):
        return delta
    return CheckedDelta(
        [node_values(n) for n in delta.node_upserts],
        list(delta.node_removals),
        list(delta.domain_upserts),
        list(delta.domain_removals),
        [
            NodeUsage(u.name, u.gpu_used, u.cpu_used_millis, u.memory_used_bytes)
            for u in delta.node_usages
        ],
    )


def node_model(node: NodeValues) -> NodeIn:
    """The node as the API's model (a HyperNode change re-checks the whole inventory)."""
    return NodeIn.model_validate(node._asdict())
