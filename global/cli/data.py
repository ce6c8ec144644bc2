"""`vglobal get datasources` and `vglobal get datasourceclaims`: where each dataset is and how
large, and which job reads which; `vglobal get staging`: the data in motion, shares' staging
and the copies that belong to no share (prefetch) (docs/data.md)."""

from __future__ import annotations

from typing import Any

from volcano_global.cli.client import Client, CliError
from volcano_global.cli.output import Column, Format, render

DATA_SOURCE_WORDS = frozenset({"datasources", "datasource"})
CLAIM_WORDS = frozenset({"datasourceclaims", "datasourceclaim"})
STAGING_WORDS = frozenset({"staging", "copies", "copy"})
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


STAGING_COLUMNS: list[Column] = [
    ("KIND", lambda r: r["kind"]),
    ("JOB", lambda r: r["job"]),
    ("DATA", lambda r: r["data"]),
    ("SIZE", lambda r: size(r["bytes"])),
    ("FROM", lambda r: r["from"] or "-"),
    ("TO", lambda r: r["to"]),
    ("GBPS", lambda r: f"{r['gbps']:g}"),
    ("STATE", lambda r: r["state"]),
    ("PROGRESS", lambda r: r["message"] or "-"),
]


def staging_rows(listing: dict[str, Any]) -> list[dict[str, Any]]:
    """`GET /api/v1/staging` as one row per copy: each share's staging items (kind `share`),
    then the copies that belong to no share (kind: their purpose, e.g. `prefetch`)."""
    rows = [
        {
            "kind": "share",
            "job": f"{s['namespace']}/{s['name']}",
            "data": i["dataSource"],
            "bytes": i["bytes"],
            "from": i["sourceCluster"],
            "to": s["cluster"],
            "gbps": i["gbps"],
            "state": s["phase"],
            "message": s["message"],
        }
        for s in listing["items"]
        for i in s["items"]
    ]
    rows += [
        {
            "kind": c["purpose"],
            "job": f"{c['namespace']}/{c['name']}" if c["name"] else "-",
            "data": c["dataSource"],
            "bytes": c["bytes"],
            "from": c["sourceCluster"],
            "to": c["cluster"],
            "gbps": c["gbps"],
            "state": c["state"],
            "message": c["message"],
        }
        for c in listing["copies"]
    ]
    return rows


def get_data(
    api: Client, what: str, fmt: Format, *, name: str | None = None, namespace: str | None = None
) -> None:
    """List the DataSources, the claims (of one namespace when given), or the staging; or one
    DataSource or claim by name."""
    if what in STAGING_WORDS:
        if name is not None:
            raise CliError(f"`get {what}` lists every copy in motion: it takes no name")
        listing = api.request("GET", "/api/v1/staging")
        table = fmt not in (Format.JSON, Format.YAML)
        render({"items": staging_rows(listing)} if table else listing, fmt, STAGING_COLUMNS)
        return
    if what in DATA_SOURCE_WORDS:
        path = "/api/v1/datasources" + (f"/{name}" if name else "")
        render(api.request("GET", path), fmt, DATA_SOURCE_COLUMNS)
        return
    params: dict[str, Any] = {"namespace": namespace} if namespace else {}
    claims = api.request("GET", "/api/v1/datasourceclaims", params=params)
    if name is not None:
        claims = {**claims, "items": [c for c in claims["items"] if c["name"] == name]}
        if not claims["items"]:
            where = f" in namespace {namespace}" if namespace else ""
            raise CliError(f"no DataSourceClaim named {name!r}{where}")
    render(claims, fmt, CLAIM_COLUMNS)
