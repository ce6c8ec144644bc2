"""Simulated clusters cut from the real Lingjun 3-tier fabric: each aggregation switch (PSW)
and the hosts under it become one member cluster, with HyperNodes tier 1 = ToR (ASW) and
tier 2 = PSW."""

from __future__ import annotations

import csv
from collections import defaultdict
from dataclasses import dataclass
from importlib import resources
from typing import Any


@dataclass(frozen=True)
class Host:
    host_id: str
    core: str
    aggregation: str
    tor: str


def load_lingjun_hosts() -> list[Host]:
    text = resources.files("core_agent").joinpath("data/lingjun_2023_topo.csv").read_text()
    return [
        Host(host_id=row["ip"], core=row["DSW"], aggregation=row["PSW"], tor=row["ASW"])
        for row in csv.DictReader(text.splitlines())
    ]


def hosts_by_aggregation(hosts: list[Host]) -> dict[str, list[Host]]:
    groups: dict[str, list[Host]] = defaultdict(list)
    for host in hosts:
        groups[host.aggregation].append(host)
    return dict(sorted(groups.items()))


def inventory_snapshot(
    hosts: list[Host],
    *,
    cluster: str,
    gpu_model: str,
    gpus_per_node: int = 8,
    cpu_millis: int = 192_000,
    memory_bytes: int = 2048 << 30,
) -> dict[str, Any]:
    """The REST inventory snapshot (camelCase JSON) of one simulated cluster."""
    domains: dict[str, dict[str, Any]] = {}
    nodes = []
    for index, host in enumerate(sorted(hosts, key=lambda h: (h.tor, h.host_id))):
        spine = f"{cluster}-{host.aggregation.lower()}"
        tor = f"{cluster}-{host.aggregation.lower()}-{host.tor.lower()}"
        domains.setdefault(spine, {"name": spine, "tier": 2, "tierName": "spine"})
        domains.setdefault(tor, {"name": tor, "tier": 1, "tierName": "tor", "parent": spine})
        nodes.append(
            {
                "name": f"{cluster}-node-{index:04d}",
                "gpuModel": gpu_model,
                "gpuAllocatable": gpus_per_node,
                "cpuAllocatableMillis": cpu_millis,
                "memoryAllocatableBytes": memory_bytes,
                "domain": tor,
                "labels": {"lingjun/host": host.host_id[:16]},
            }
        )
    return {"domains": list(domains.values()), "nodes": nodes}
