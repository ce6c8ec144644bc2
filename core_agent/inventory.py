"""The agent's view of its cluster's inventory, as protocol messages, and the diff between
two views (what a delta carries)."""

from __future__ import annotations

from dataclasses import dataclass, field

from volcano_global.rpc.v1 import agent_pb2 as pb


@dataclass
class Inventory:
    domains: dict[str, pb.Domain] = field(default_factory=dict)
    nodes: dict[str, pb.Node] = field(default_factory=dict)

    def copy(self) -> Inventory:
        return Inventory(dict(self.domains), {name: _clone(n) for name, n in self.nodes.items()})

    def snapshot(self, seq: int) -> pb.InventorySnapshot:
        # Parents before children, as the Global stores them.
        domains = sorted(self.domains.values(), key=lambda d: (-d.tier, d.name))
        return pb.InventorySnapshot(seq=seq, domains=domains, nodes=list(self.nodes.values()))

    def delta_to(self, newer: Inventory, seq: int) -> pb.InventoryDelta | None:
        """What turns this view into `newer`; None when nothing changed."""
        delta = pb.InventoryDelta(
            seq=seq,
            node_upserts=[n for name, n in newer.nodes.items() if self.nodes.get(name) != n],
            node_removals=[name for name in self.nodes if name not in newer.nodes],
            domain_upserts=sorted(
                (d for name, d in newer.domains.items() if self.domains.get(name) != d),
                key=lambda d: (-d.tier, d.name),
            ),
            domain_removals=[name for name in self.domains if name not in newer.domains],
        )
        empty = not (
            delta.node_upserts
            or delta.node_removals
            or delta.domain_upserts
            or delta.domain_removals
        )
        return None if empty else delta


def _clone(node: pb.Node) -> pb.Node:
    copy = pb.Node()
    copy.CopyFrom(node)
    return copy
