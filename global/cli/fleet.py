"""The fleet's objects as `vglobal get` lists them in kubectl's words: clusters, links and
PriorityClasses, all of them or one by name."""

from __future__ import annotations

from volcano_global.cli.client import Client
from volcano_global.cli.output import Column, Format, gpus, render

CLUSTER_WORDS = frozenset({"clusters", "cluster"})
LINK_WORDS = frozenset({"links", "link"})
CLASS_WORDS = frozenset({"priorityclasses", "priorityclass", "pc"})
FLEET_WORDS = CLUSTER_WORDS | LINK_WORDS | CLASS_WORDS

CLUSTER_COLUMNS: list[Column] = [
    ("NAME", lambda c: c["name"]),
    ("STATE", lambda c: c["state"]),
    ("NODES", lambda c: f"{c['nodes']['ready']}/{c['nodes']['total']}"),
    ("GPUS FREE/TOTAL", lambda c: gpus(c["capacity"])),
    ("LABELS", lambda c: labels(c["labels"])),
]
LINK_COLUMNS: list[Column] = [
    ("CLUSTER A", lambda link: link["clusterA"]),
    ("CLUSTER B", lambda link: link["clusterB"]),
    ("CAPACITY GBPS", lambda link: f"{link['capacityGbps']:g}"),
    ("RESERVED GBPS", lambda link: f"{link['reservedGbps']:g}"),
    ("LATENCY MS", lambda link: f"{link['latencyMs']:g}"),
]
CLASS_COLUMNS: list[Column] = [
    ("NAME", lambda c: c["metadata"]["name"]),
    ("VALUE", lambda c: c["value"]),
    ("GLOBAL-DEFAULT", lambda c: str(c["globalDefault"]).lower()),
    ("PREEMPTIONPOLICY", lambda c: c["preemptionPolicy"]),
]


def labels(values: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in values.items()) or "-"


def get_fleet(api: Client, what: str, name: str | None, fmt: Format) -> None:
    """`get clusters [NAME]`, `get links [CLUSTER]` (the links of one cluster), `get pc
    [NAME]`."""
    if what in CLUSTER_WORDS:
        path = "/api/v1/clusters" + (f"/{name}" if name else "")
        render(api.request("GET", path), fmt, CLUSTER_COLUMNS)
    elif what in LINK_WORDS:
        links = api.request("GET", "/api/v1/links")
        if name is not None:
            api.request("GET", f"/api/v1/clusters/{name}")  # a cluster of that name: else 404
            links = {**links, "items": cluster_links(links["items"], name)}
        render(links, fmt, LINK_COLUMNS)
    else:
        path = "/api/v1/priorityclasses" + (f"/{name}" if name else "")
        render(api.request("GET", path), fmt, CLASS_COLUMNS)


def cluster_links(links: list[dict], cluster: str) -> list[dict]:
    return [link for link in links if cluster in (link["clusterA"], link["clusterB"])]
