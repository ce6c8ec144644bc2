"""Rendering command results as a table, JSON or YAML."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime
from enum import StrEnum
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table

_probe = Console()
# Piped output (CI logs, `| less`) gets wide rows instead of Rich's 80-column default.
console = _probe if _probe.is_terminal else Console(width=200)

Column = tuple[str, Callable[[dict[str, Any]], Any]]


class Format(StrEnum):
    TABLE = "table"
    JSON = "json"
    YAML = "yaml"


def render(
    data: Any, fmt: Format, columns: Sequence[Column], items_key: str | None = "items"
) -> None:
    if fmt is Format.JSON:
        print(json.dumps(data, indent=2))
        return
    if fmt is Format.YAML:
        print(yaml.safe_dump(data, sort_keys=False), end="")
        return
    rows = rows_of(data, items_key)
    table = Table(box=None, header_style="bold")
    for title, _ in columns:
        table.add_column(title)
    for row in rows:
        table.add_row(*("" if (v := get(row)) is None else str(v) for _, get in columns))
    console.print(table)


def rows_of(data: Any, items_key: str | None) -> list[dict[str, Any]]:
    """A list's items, or the one object (a job's detail) as the only row."""
    if isinstance(data, dict) and items_key and items_key in data:
        return list(data[items_key])
    return [data] if isinstance(data, dict) else list(data or [])


def gpus(capacity: list[dict[str, Any]]) -> str:
    return ", ".join(f"{c['gpuModel']} {c['free']}/{c['total']}" for c in capacity) or "-"


def run_duration(job: dict[str, Any]) -> str:
    """How long a job's run ran (started to finished, or to now while it runs), in kubectl's
    short form; `-` before it started."""
    times = job.get("timestamps") or {}
    if not times.get("startedAt"):
        return "-"
    start = datetime.fromisoformat(times["startedAt"])
    end = datetime.fromisoformat(times["finishedAt"]) if times.get("finishedAt") else None
    seconds = int(((end or datetime.now(start.tzinfo)) - start).total_seconds())
    if seconds < 120:
        return f"{max(0, seconds)}s"
    minutes, hours = seconds // 60, seconds // 3600
    if hours < 1:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if hours < 48:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"
