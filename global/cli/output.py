"""Rendering command results as a table, JSON or YAML."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
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
    rows = data.get(items_key, []) if items_key and isinstance(data, dict) else data
    if isinstance(rows, dict):
        rows = [rows]
    table = Table(box=None, header_style="bold")
    for title, _ in columns:
        table.add_column(title)
    for row in rows:
        table.add_row(*("" if (v := get(row)) is None else str(v) for _, get in columns))
    console.print(table)


def gpus(capacity: list[dict[str, Any]]) -> str:
    return ", ".join(f"{c['gpuModel']} {c['free']}/{c['total']}" for c in capacity) or "-"
