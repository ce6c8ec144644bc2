"""The Grafana dashboard in deploy/: well-formed, shipped by every management overlay as a
ConfigMap for Grafana's sidecar, and every metric its queries read is one the Global exports
(the names are read from the registry and the scrape's database families, not listed here)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from fastapi import FastAPI
from prometheus_client.core import Metric

from tests.deploy.manifests import DEPLOY, OVERLAYS, find, render
from volcano_global.db.engine import reading
from volcano_global.metrics import Metrics, database_families

DASHBOARD = DEPLOY / "base" / "global" / "dashboards" / "volcano-global.json"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
PANEL_TYPES = {"row", "timeseries", "stat"}
# Sample names a metric family of each type exposes (prometheus_client's text format).
SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "gauge": ("",),
}
PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset"}
PROMQL_WORDS |= {"and", "or", "unless", "inf", "nan"}


def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def queries(board: dict[str, Any]) -> list[str]:
    return [t["expr"] for p in board["panels"] for t in p.get("targets", [])]


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads: what is left once label matchers, ranges,
    strings, grouping clauses, functions and keywords are taken out."""
    expr = re.sub(r"\"[^\"]*\"|'[^']*'", "", expr)
    expr = re.sub(r"\{[^}]*\}|\[[^\]]*\]", "", expr)
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    words = re.findall(r"(?<![\w.$])([A-Za-z_:][\w:]*)\b(?!\s*\()", expr)
    return {w for w in words if w.lower() not in PROMQL_WORDS}


def sample_names(families: list[Metric]) -> set[str]:
    return {f.name + suffix for f in families for suffix in SUFFIXES.get(f.type, ("",))}


async def exported(app: FastAPI) -> set[str]:
    """Every sample name a scrape of the Global can hold: the process's registry (HTTP,
    scheduling, process_*) and the gauges read from the database."""
    names = sample_names(list(Metrics().registry.collect()))
    async with reading(app.state.sessions) as session:
        return names | sample_names(await database_families(session))


def test_the_dashboard_is_well_formed() -> None:
    board = dashboard()
    assert board["uid"] and board["title"] and isinstance(board["schemaVersion"], int)
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    panels = board["panels"]
    assert len({p["id"] for p in panels}) == len(panels) > 0
    for panel in panels:
        assert panel["type"] in PANEL_TYPES, panel["title"]
        grid = panel["gridPos"]
        assert all(isinstance(grid[k], int) for k in "xywh") and grid["x"] + grid["w"] <= 24
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == DATASOURCE, panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["expr"] and target["refId"] and target["datasource"] == DATASOURCE


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ('sum by (state) (vglobal_jobs{state="Pending"})', {"vglobal_jobs"}),
        (
            "histogram_quantile(0.95, sum by (le) (rate(a_bucket[$__rate_interval])))",
            {"a_bucket"},
        ),
        ("1 - sum(a{kind='x'}) / on (c) b offset 5m", {"a", "b"}),
    ],
)
def test_metric_names_are_read_out_of_promql(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


async def test_every_metric_the_dashboard_reads_is_exported(app: FastAPI) -> None:
    names = await exported(app)
    read = set().union(*(metric_names(q) for q in queries(dashboard())))
    assert read, "the dashboard reads no metric"
    assert read - names == set(), f"not exported by the Global: {sorted(read - names)}"
    assert "vglobal_queue_pending_jobs" in read and "vglobal_cluster_gpus" in read


@pytest.mark.parametrize("overlay", [o for o in OVERLAYS if o.name.startswith("management")])
def test_management_overlays_ship_it_for_the_grafana_sidecar(overlay: Any) -> None:
    config_map = find(render(overlay), "ConfigMap", "volcano-global-dashboard")
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(config_map["data"]["volcano-global.json"]) == dashboard()
