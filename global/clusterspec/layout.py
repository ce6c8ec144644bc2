"""What a simulated cluster's spec lays out: its nodes (GPUs, CPU, memory, leaf domain) and its
HyperNode domains, in a fixed order (the simulator's placements depend on it)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from volcano_global.clusterspec.fabric import hosts_by_aggregation, load_lingjun_hosts
from volcano_global.clusterspec.spec import ClusterSpec, LingjunSpec
from volcano_global.jobspec.gpu_models import canonical_model
from volcano_global.jobspec.quantity import parse_quantity


@dataclass(frozen=True)
class NodeLayout:
    name: str
    gpu_model: str
    gpus: int
    cpu_millis: int
    memory_bytes: int
    domain: str | None  # its leaf domain (tier 1); None: outside any
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class DomainLayout:
    name: str
    tier: int
    tier_name: str
    parent: str | None = None


@dataclass(frozen=True)
class ClusterLayout:
    nodes: tuple[NodeLayout, ...]  # names distinct: a later node of a name replaces the first
    domains: tuple[DomainLayout, ...]  # each tier's after the tier below


def from_spec(name: str, spec: ClusterSpec) -> ClusterLayout:
    """The node groups in order, named `<prefix>-00000...` (prefix: `<cluster>-g<group>`);
    tier 1 groups consecutive nodes `size` at a time, each tier above groups the domains of
    the tier below the same way."""
    nodes = [
        (f"{group.name_prefix or f'{name}-g{index}'}-{i:05d}", group)
        for index, group in enumerate(spec.node_groups)
        for i in range(group.count)
    ]
    leaf: list[str | None] = [None] * len(nodes)
    domains: list[DomainLayout] = []
    parents: dict[str, str] = {}
    members: list[str] = []  # the domains of the tier below
    for tier_index, tier in enumerate(spec.topology.tiers, start=1):
        count = len(nodes) if tier_index == 1 else len(members)
        above = [f"{name}-{tier.name}{g:04d}" for g in range((count + tier.size - 1) // tier.size)]
        domains += [DomainLayout(domain, tier_index, tier.name) for domain in above]
        for i in range(count):
            if tier_index == 1:
                leaf[i] = above[i // tier.size]
            else:
                parents[members[i]] = above[i // tier.size]
        members = above
    return ClusterLayout(
        nodes=_distinct(
            NodeLayout(
                node_name,
                group.gpu_model,
                group.gpus_per_node,
                group.cpu * 1000,
                int(parse_quantity(group.memory)),
                leaf[i],
            )
            for i, (node_name, group) in enumerate(nodes)
        ),
        domains=tuple(
            DomainLayout(d.name, d.tier, d.tier_name, parents.get(d.name)) for d in domains
        ),
    )


def from_lingjun(name: str, *, block: int = 0, gpu_model: str = "H800") -> ClusterLayout:
    """One aggregation block (PSW) of the real Lingjun fabric: its hosts, 8 GPUs each, under
    ToR (tier 1) and aggregation (tier 2) HyperNodes."""
    gpu_model = canonical_model(gpu_model)
    blocks = list(hosts_by_aggregation(load_lingjun_hosts()).items())
    aggregation, hosts = blocks[block % len(blocks)]
    spine = f"{name}-{aggregation.lower()}"
    domains = {spine: DomainLayout(spine, 2, "spine")}
    nodes = []
    for i, host in enumerate(sorted(hosts, key=lambda h: (h.tor, h.host_id))):
        tor = f"{spine}-{host.tor.lower()}"
        domains.setdefault(tor, DomainLayout(tor, 1, "tor", spine))
        labels = {"lingjun/host": host.host_id[:16]}
        nodes.append(
            NodeLayout(f"{name}-node-{i:04d}", gpu_model, 8, 192_000, 2048 << 30, tor, labels)
        )
    return ClusterLayout(nodes=tuple(nodes), domains=tuple(domains.values()))


def from_file(name: str, path: Path) -> ClusterLayout:
    """A spec file: node groups and tiers, or `{lingjunBlock: N, gpuModel: M}` for a block of
    the real Lingjun fabric."""
    data = yaml.safe_load(path.read_text())
    if isinstance(data, dict) and "lingjunBlock" in data:
        block = LingjunSpec.model_validate(data)
        return from_lingjun(name, block=block.lingjun_block, gpu_model=block.gpu_model)
    return from_spec(name, ClusterSpec.model_validate(data))


def _distinct(nodes: Iterable[NodeLayout]) -> tuple[NodeLayout, ...]:
    return tuple({node.name: node for node in nodes}.values())
