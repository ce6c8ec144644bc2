"""`vglobal apply -f FILE` (every document of a file, in order, idempotent) and the watch of
`vglobal get jobs|queues -w` (the list, then each change until interrupted)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import typer

from volcano_global.cli.client import Client, CliError
from volcano_global.cli.context import client, options
from volcano_global.cli.output import Column, Format, render


def apply(
    ctx: typer.Context,
    files: Annotated[
        list[Path],
        typer.Option(
            "-f",
            "--filename",
            help="YAML/JSON file of documents, or a directory of them ('-' = stdin)",
        ),
    ],
) -> None:
    """Apply every document of each file in order (Volcano Jobs and HyperJobs, Queues,
    PriorityClasses, DataSources and DataSourceClaims). A job already applied with the same
    document is unchanged; any other kind is created, configured (replaced by the document)
    or unchanged. A directory stands for its *.yaml, *.yml and *.json files in name order
    (not its subdirectories), as with kubectl."""
    api = client(ctx)
    failed = 0
    for path in document_files(files):
        text = sys.stdin.read() if str(path) == "-" else _read(path)
        media = "application/json" if path.suffix == ".json" else "application/yaml"
        result = api.request(
            "POST",
            "/api/v1/apply",
            content=text.encode(),
            headers={"Content-Type": media},
            ok=(403,),  # some documents refused: every document's result, printed below
        )
        if "items" not in result:  # the whole call refused (a Status)
            raise CliError(f"403 Forbidden: {result.get('message')}")
        if options(ctx).output is not Format.TABLE:
            render(result, options(ctx).output, [])
        for item in result["items"]:
            kind = (item["kind"] or "document").lower()
            ref = "/".join(p for p in (item["namespace"], item["name"]) if p) or f"#{item['index']}"
            if item["result"] == "error":
                failed += 1
                typer.secho(f"error: {item['message']}", fg="red", err=True)
                for cause in item["causes"]:
                    where = f"{cause['field']}: " if cause["field"] else ""
                    typer.secho(f"  {where}{cause['message']}", fg="red", err=True)
            elif options(ctx).output is Format.TABLE:
                typer.echo(f"{kind}.{_group(item['apiVersion'])}/{ref} {item['result']}")
    if failed:
        raise typer.Exit(1)


DOCUMENT_SUFFIXES = frozenset({".yaml", ".yml", ".json"})


def document_files(paths: list[Path]) -> list[Path]:
    """The files named, a directory replaced by its document files in name order."""
    files: list[Path] = []
    for path in paths:
        if str(path) != "-" and path.is_dir():
            found = sorted(
                p for p in path.iterdir() if p.suffix in DOCUMENT_SUFFIXES and p.is_file()
            )
            if not found:
                raise CliError(f"{path}: no *.yaml, *.yml or *.json file in this directory")
            files.extend(found)
        else:
            files.append(path)
    return files


def _group(api_version: str | None) -> str:
    return (api_version or "").rsplit("/", 1)[0]


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as exc:
        raise CliError(f"{path}: {exc.strerror}") from None


Read = Callable[[Client, str | None], tuple[list[dict[str, Any]], str | None, bool]]
"""A watch's read: (items, the cursor of the next read, whether the items are the whole list
- so that an item missing from it was deleted - or only what changed since the cursor)."""


def watch(
    api: Client,
    *,
    read: Read,
    key: Callable[[dict[str, Any]], str],
    columns: list[Column],
    fmt: Format,
    interval_s: float,
    rounds: int | None = None,
) -> None:
    """Print the list, then every item that was added, changed or deleted, as `kubectl get -w`
    does, reading again every `interval_s`; `rounds` bounds the reads after the first (None:
    until interrupted). A table prints a row again only when a cell it shows changed, in
    columns as wide as the first list's."""
    seen: dict[str, dict[str, Any]] = {}
    table = _WatchTable(columns) if fmt is Format.TABLE else None
    cursor: str | None = None
    done = 0
    try:
        while True:
            items, cursor, complete = read(api, cursor)
            fresh = {key(i): i for i in items}
            rows = [(k, i) for k, i in fresh.items() if seen.get(k) != i]
            if complete:
                rows += [(k, {**seen.pop(k), "_deleted": True}) for k in seen.keys() - fresh.keys()]
            seen.update(fresh)
            if table is not None:
                table.print(rows, first=done == 0)
            elif rows:
                _print_objects([row for _, row in rows], fmt)
            if rounds is not None and done >= rounds:
                return
            done += 1
            time.sleep(interval_s)  # polling a REST list: there is no change stream to await
    except KeyboardInterrupt:
        return


def job_changes(
    api: Client, cursor: str | None, *, namespace: str | None = None
) -> tuple[list[dict[str, Any]], str | None, bool]:
    """Every job (of `namespace` if given) at first, then the jobs changed since the cursor
    (`updatedSince`, indexed).
    The cursor trails the newest change seen by CURSOR_OVERLAP_S, so a change committed late
    or stamped by a replica whose clock lags is still read; what was already shown is not
    shown again (the watch compares)."""
    params: dict[str, Any] = {"limit": 1000}
    if namespace:
        params["namespace"] = namespace
    if cursor is not None:
        params["updatedSince"] = cursor
    items: list[dict[str, Any]] = []
    while True:
        page = api.request("GET", "/api/v1/jobs", params=params)
        items.extend(page["items"])
        token = page["metadata"].get("continue")
        if not token:
            break
        params["continue"] = token
    stamps = [i["timestamps"]["updatedAt"] for i in items if i["timestamps"].get("updatedAt")]
    if stamps:
        newest = datetime.fromisoformat(max(stamps).replace("Z", "+00:00"))
        cursor = (newest - timedelta(seconds=CURSOR_OVERLAP_S)).isoformat()
    return items, cursor, False


CURSOR_OVERLAP_S = 5.0


def queue_list(api: Client, cursor: str | None) -> tuple[list[dict[str, Any]], str | None, bool]:
    """Queues are few: the whole list each time, so a deleted one shows."""
    return list(api.request("GET", "/api/v1/queues")["items"]), None, True


def _print_objects(rows: list[dict[str, Any]], fmt: Format) -> None:
    for row in rows:
        event = "DELETED" if row.pop("_deleted", False) else "MODIFIED"
        render({"type": event, "object": row}, fmt, [])
    sys.stdout.flush()


class _WatchTable:
    """`kubectl get -w`'s table: the header and first rows set the column widths; a row is
    printed again only when what it shows changed (a job's timestamps move more often)."""

    def __init__(self, columns: list[Column]) -> None:
        self.columns = columns
        self.widths = [len(title) for title, _ in columns]
        self.shown: dict[str, list[str]] = {}

    def print(self, rows: list[tuple[str, dict[str, Any]]], *, first: bool) -> None:
        lines: list[list[str]] = []
        for k, row in rows:
            cells = [str(get(row)) for _, get in self.columns]
            if row.get("_deleted"):
                self.shown.pop(k, None)
                cells.append("(deleted)")
            elif self.shown.get(k) == cells:
                continue
            else:
                self.shown[k] = cells
            lines.append(cells)
        if first:
            for cells in lines:
                self.widths = [max(w, len(c)) for w, c in zip(self.widths, cells, strict=False)]
            lines.insert(0, [title for title, _ in self.columns])
        for cells in lines:
            typer.echo(self._line(cells))
        sys.stdout.flush()

    def _line(self, cells: list[str]) -> str:
        padded = [c.ljust(w) for c, w in zip(cells, self.widths, strict=False)]
        return "   ".join(padded + cells[len(self.widths) :]).rstrip()
