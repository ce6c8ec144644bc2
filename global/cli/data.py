"""`vglobal get datasources` and `vglobal get datasourceclaims`: where each dataset is and how
large, and which job reads which (docs/data.md)."""

from __future__ import annotations

from typing import Any

from volcano_global.cli.client import Client
from volcano_global.cli.output import Column, Format, render

DATA_SOURCE_WORDS = frozenset({"datasources", "datasource"})
CLAIM_WORDS = frozenset({"datasourceclaims", "datasourceclaim"})
_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def size(value: int | None) -> str:
    """Bytes in binary units, as people write dataset sizes (`40 TiB`)."""
    if value is None:
        return "-"
    amount, unit = float(value), 0
    while amount >= 1024 and unit < len(_UNITS) - 1:
        amount, unit = amount / 1024, unit + 1
    return f"{amount:.3g} {_UNITS[unit]}"


DATA_SOURCE_COLUMNS: list[Column] = [
    ("NAME", lambda d: d["name"]),
    ("SIZE", lambda d: size(d["sizeBytes"])),
    ("CLUSTERS", lambda d: ",".join(d["clusters"]) or "-"),
    ("CLAIMS", lambda d: d["boundClaims"]),
    ("SYSTEM/TYPE", lambda d: f"{d['system']}/{d['type']}"),
]
CLAIM_COLUMNS: list[Column] = [
    ("NAMESPACE", lambda c: c["namespace"]),
    ("NAME", lambda c: c["name"]),
    ("DATASOURCE", lambda c: c["dataSourceName"]),
    ("WORKLOAD", lambda c: f"{c['workload']['kind']}/{c['workload']['name']}"),
    ("BOUND TO", lambda c: c["boundDataSource"] or "-"),
    ("READ GBPS", lambda c: "-" if c["readGbps"] is None else f"{c['readGbps']:g}"),
]


def get_data(api: Client, what: str, fmt: Format, *, namespace: str | None = None) -> None:
    """List the DataSources, or the claims (of one namespace when given)."""
    if what in DATA_SOURCE_WORDS:
        render(api.request("GET", "/api/v1/datasources"), fmt, DATA_SOURCE_COLUMNS)
        return
    params: dict[str, Any] = {"namespace": namespace} if namespace else {}
    render(api.request("GET", "/api/v1/datasourceclaims", params=params), fmt, CLAIM_COLUMNS)
