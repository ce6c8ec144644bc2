"""`vglobal apply -f FILE` (every document of a file, in order, idempotent) and the watch of
`vglobal get jobs|queues -w` (the list, then each change until interrupted)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
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
        typer.Option("-f", "--filename", help="YAML/JSON file of documents ('-' = stdin)"),
    ],
) -> None:
    """Apply every document of each file in order (Volcano Jobs and HyperJobs; Queues and
    PriorityClasses once served). A job already applied with the same document is unchanged."""
    api = client(ctx)
    failed = 0
    for path in files:
        text = sys.stdin.read() if str(path) == "-" else _read(path)
        media = "application/json" if path.suffix == ".json" else "application/yaml"
        result = api.request(
            "POST", "/api/v1/apply", content=text.encode(), headers={"Content-Type": media}
        )
        if options(ctx).output is not Format.TABLE:
            render(result, options(ctx).output, [])
        for item in result["items"]:
            kind = (item["kind"] or "document").lower()
            ref = "/".join(p for p in (item["namespace"], item["name"]) if p) or f"#{item['index']}"
            if item["result"] == "error":
                failed += 1
                typer.secho(f"error: {item['message']}", fg="red", err=True)
                for cause in item["causes"]:
                    typer.secho(f"  {cause['field']}: {cause['message']}", fg="red", err=True)
            elif options(ctx).output is Format.TABLE:
                typer.echo(f"{kind}.{_group(item['apiVersion'])}/{ref} {item['result']}")
    if failed:
        raise typer.Exit(1)


def _group(api_version: str | None) -> str:
    return (api_version or "").rsplit("/", 1)[0]


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as exc:
        raise CliError(f"{path}: {exc.strerror}") from None


def watch(
    api: Client,
    *,
    list_items: Callable[[Client], list[dict[str, Any]]],
    key: Callable[[dict[str, Any]], str],
    columns: list[Column],
    fmt: Format,
    interval_s: float,
    rounds: int | None = None,
) -> None:
    """Print the list, then every item that was added, changed or deleted, as `kubectl get -w`
    does, by reading the list again every `interval_s` (the REST API has no change stream for
    these yet); `rounds` bounds the reads after the first (None: until interrupted)."""
    seen: dict[str, dict[str, Any]] = {}
    header = True
    try:
        for items in _reads(api, list_items, interval_s, rounds):
            now = {key(i): i for i in items}
            changed = [i for k, i in now.items() if seen.get(k) != i]
            gone = [seen[k] for k in seen.keys() - now.keys()]
            rows = [*changed, *({**g, "_deleted": True} for g in gone)]
            if rows or header:
                _print_rows(rows, columns, fmt, header=header)
                header = False
            seen = now
    except KeyboardInterrupt:
        return


def _reads(
    api: Client,
    list_items: Callable[[Client], list[dict[str, Any]]],
    interval_s: float,
    rounds: int | None,
) -> Iterator[list[dict[str, Any]]]:
    yield list_items(api)
    done = 0
    while rounds is None or done < rounds:
        time.sleep(interval_s)  # polling a REST list: nothing to await between reads
        yield list_items(api)
        done += 1


def _print_rows(
    rows: list[dict[str, Any]], columns: list[Column], fmt: Format, *, header: bool
) -> None:
    if fmt is not Format.TABLE:
        for row in rows:
            event = "DELETED" if row.pop("_deleted", False) else "MODIFIED"
            render({"type": event, "object": row}, fmt, [])
        sys.stdout.flush()
        return
    if header:
        typer.echo("   ".join(title for title, _ in columns))
    for row in rows:
        cells = [str(get(row)) for _, get in columns]
        if row.get("_deleted"):
            cells.append("(deleted)")
        typer.echo("   ".join(cells))
    sys.stdout.flush()
