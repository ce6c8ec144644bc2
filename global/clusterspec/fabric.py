"""Simulated clusters cut from the real Lingjun 3-tier fabric: each aggregation switch (PSW)
and the hosts under it become one member cluster, with HyperNodes tier 1 = ToR (ASW) and
tier 2 = PSW."""

from __future__ import annotations

import csv
from collections import defaultdict
from dataclasses import dataclass
from importlib import resources


@dataclass(frozen=True)
class Host:
    host_id: str
    core: str
    aggregation: str
    tor: str


def load_lingjun_hosts() -> list[Host]:
    text = (
        resources.files("volcano_global.clusterspec")
        .joinpath("data/lingjun_2023_topo.csv")
        .read_text()
    )
    return [
        Host(host_id=row["ip"], core=row["DSW"], aggregation=row["PSW"], tor=row["ASW"])
        for row in csv.DictReader(text.splitlines())
    ]


def hosts_by_aggregation(hosts: list[Host]) -> dict[str, list[Host]]:
    groups: dict[str, list[Host]] = defaultdict(list)
    for host in hosts:
        groups[host.aggregation].append(host)
    return dict(sorted(groups.items()))
