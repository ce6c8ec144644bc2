"""The agent's view of its cluster's inventory, as protocol messages, and the diff between
two views (what a delta carries), over every name or only the names a source says it touched."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from volcano_global.rpc.v1 import agent_pb2 as pb

# Inventory changes within this window go to the Global as one delta: a large cluster's
# inventory changes all the time (pods come and go), and one delta a second per cluster keeps
# the Global within a second of it at a twentieth of the transactions of 50 ms.
DEFAULT_COALESCE_S = 1.0


Usage = tuple[int, int, int]  # what a node's pods use: GPUs, CPU millis, memory bytes
NamedUsage = tuple[str, int, int, int]  # a node's name and its Usage, as a NodeUsage holds them


@dataclass
class Changes:
    """Names of nodes and domains touched since a source last reported its changes. A touched
    name may hold the same value as before, or be gone. A source that can tell keeps apart in
    `usages` the nodes whose usage alone was touched (never also in `nodes`), and answers
    `usages_of(names) -> dict[str, Usage]`."""

    nodes: set[str] = field(default_factory=set)
    domains: set[str] = field(default_factory=set)
    usages: set[str] = field(default_factory=set)


@dataclass
class Inventory:
    domains: dict[str, pb.Domain] = field(default_factory=dict)
    nodes: dict[str, pb.Node] = field(default_factory=dict)

    def snapshot(self, seq: int) -> pb.InventorySnapshot:
        return pb.InventorySnapshot(
            seq=seq, domains=_parents_first(self.domains.values()), nodes=list(self.nodes.values())
        )

    def delta_to(
        self,
        newer: Inventory,
        seq: int,
        *,
        within: Changes | None = None,
        usages: bool = False,
        node_usages: list[NamedUsage] | None = None,
    ) -> pb.InventoryDelta | None:
        """What turns this view into `newer`; None when nothing changed. With `within`, only
        those names are compared (`newer` need hold no other). With `usages`, a node whose
        usage alone changed goes as its usage, not whole; `node_usages` go with them (usages
        of other names, already found)."""
        nodes = self.nodes.keys() | newer.nodes.keys() if within is None else within.nodes
        domains = self.domains.keys() | newer.domains.keys() if within is None else within.domains
        upserts, node_usages = [], list(node_usages or ())
        for name in sorted(nodes):
            new, old = newer.nodes.get(name), self.nodes.get(name)
            if new is None or old == new:
                continue
            if usages and old is not None and _usage_alone_changed(old, new):
                node_usages.append(_usage(new))
            else:
                upserts.append(new)
        delta = pb.InventoryDelta(
            seq=seq,
            node_upserts=upserts,
            node_removals=sorted(n for n in nodes if n in self.nodes and n not in newer.nodes),
            domain_upserts=_parents_first(
                newer.domains[d]
                for d in domains
                if d in newer.domains and self.domains.get(d) != newer.domains[d]
            ),
            domain_removals=sorted(
                d for d in domains if d in self.domains and d not in newer.domains
            ),
        )
        _add_usages(delta, node_usages)
        empty = not (
            delta.node_upserts
            or delta.node_usages
            or delta.node_removals
            or delta.domain_upserts
            or delta.domain_removals
        )
        return None if empty else delta

    def take_usages(self, usages: dict[str, Usage]) -> tuple[list[NamedUsage], set[str]]:
        """Bring this view's nodes to these usages: the usages that changed one, and the names
        this view does not hold (they must go whole)."""
        changed, whole = [], set()
        for name, (gpus, cpu, memory) in usages.items():
            node = self.nodes.get(name)
            if node is None:
                whole.add(name)
                continue
            if (node.gpu_used, node.cpu_used_millis, node.memory_used_bytes) == (gpus, cpu, memory):
                continue
            node.gpu_used, node.cpu_used_millis, node.memory_used_bytes = gpus, cpu, memory
            changed.append((name, gpus, cpu, memory))
        return changed, whole

    def patch(self, newer: Inventory, within: Changes) -> None:
        """Make the names in `within` what they are in `newer` (a view of just those names)."""
        for name in within.nodes:
            if name in newer.nodes:
                self.nodes[name] = newer.nodes[name]
            else:
                self.nodes.pop(name, None)
        for name in within.domains:
            if name in newer.domains:
                self.domains[name] = newer.domains[name]
            else:
                self.domains.pop(name, None)


def _parents_first(domains: Iterable[pb.Domain]) -> list[pb.Domain]:
    """Parents before children, as the Global stores them."""
    return sorted(domains, key=lambda d: (-d.tier, d.name))


def _usage_alone_changed(old: pb.Node, new: pb.Node) -> bool:
    """Whether the two differ in what the node's pods use only (`old != new` known)."""
    other = pb.Node()
    other.CopyFrom(old)
    other.gpu_used = new.gpu_used
    other.cpu_used_millis = new.cpu_used_millis
    other.memory_used_bytes = new.memory_used_bytes
    return other == new


def _usage(node: pb.Node) -> NamedUsage:
    return node.name, node.gpu_used, node.cpu_used_millis, node.memory_used_bytes


def _add_usages(delta: pb.InventoryDelta, usages: list[NamedUsage]) -> None:
    """The usages into the delta in name order, each built in place: a NodeUsage built apart
    is copied again when the delta takes it, and sorting messages reads a field of each."""
    add = delta.node_usages.add
    for name, gpus, cpu, memory in sorted(usages):
        add(name=name, gpu_used=gpus, cpu_used_millis=cpu, memory_used_bytes=memory)


def delta_of_changes(
    sent: Inventory, source: Any, changes: Changes, seq: int, *, usages: bool
) -> pb.InventoryDelta | None:
    """The delta of what `changes` touched in `source` (None: nothing changed), with `sent`,
    the view as last sent, brought up to it. With `usages`, the names whose usage alone was
    touched go as usages, read without building their nodes; else whole."""
    node_usages: list[NamedUsage] = []
    names = changes.nodes
    if changes.usages:
        whole = changes.usages
        if usages:
            node_usages, whole = sent.take_usages(source.usages_of(changes.usages))
        names = names | whole
    within = Changes(nodes=names, domains=changes.domains)
    part = source.view_of(within)
    delta = sent.delta_to(part, seq, within=within, usages=usages, node_usages=node_usages)
    sent.patch(part, within)
    return delta
