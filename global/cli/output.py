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
