"""Commands on queues as Volcano Queue documents and on PriorityClasses."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from volcano_global.cli.client import CliError
from volcano_global.cli.context import client, options
from volcano_global.cli.fleet import CLASS_COLUMNS
from volcano_global.cli.output import Format, render
from volcano_global.cli.resources import QUEUE_COLUMNS, queues_app

priorityclasses_app = typer.Typer(
    help="PriorityClasses (lists them without a subcommand).", invoke_without_command=True
)
FileOption = Annotated[list[Path], typer.Option("-f", "--file", help="YAML/JSON ('-' = stdin)")]


def _documents(files: list[Path], kind: str) -> list[dict[str, Any]]:
    found = []
    for path in files:
        try:
            text = sys.stdin.read() if str(path) == "-" else path.read_text()
            docs = [d for d in yaml.safe_load_all(text) if d is not None]
        except OSError as exc:
            raise CliError(f"{path}: {exc.strerror or exc}") from None
        except yaml.YAMLError as exc:
            from volcano_global.jobspec.documents import yaml_problem

            raise CliError(f"{path}: {yaml_problem(exc)}") from None
        for doc in docs:
            got = doc.get("kind") if isinstance(doc, dict) else type(doc).__name__
            if got != kind:
                raise CliError(f"{path}: expected kind {kind}, got {got!r}")
            name = (doc.get("metadata") or {}).get("name")
            if not isinstance(name, str) or not name:
                raise CliError(f"{path}: metadata.name is required")
            found.append(doc)
    return found


@queues_app.command("apply")
def queues_apply(ctx: typer.Context, files: FileOption) -> None:
    """Create or replace queues from Volcano Queue documents (scheduling.volcano.sh/v1beta1)."""
    api = client(ctx)
    applied = [
        api.request("PUT", f"/api/v1/queues/{doc['metadata']['name']}", json=doc)
        for doc in _documents(files, "Queue")
    ]
    render({"items": applied}, options(ctx).output, QUEUE_COLUMNS)


@queues_app.command("get")
def queues_get(ctx: typer.Context, name: str) -> None:
    """A queue as its Volcano Queue document (YAML; `-o json` for JSON)."""
    document = client(ctx).request("GET", f"/api/v1/queues/{name}/document")
    fmt = options(ctx).output
    render(document, fmt if fmt is Format.JSON else Format.YAML, [])


@queues_app.command("close")
def queues_close(ctx: typer.Context, name: str) -> None:
    """Close a queue: it refuses new jobs and keeps its own (`vcctl queue operate -a close`)."""
    client(ctx).request("PATCH", f"/api/v1/queues/{name}", json={"state": "Closed"})
    typer.echo(f"queue {name} closed")


@queues_app.command("open")
def queues_open(ctx: typer.Context, name: str) -> None:
    client(ctx).request("PATCH", f"/api/v1/queues/{name}", json={"state": "Open"})
    typer.echo(f"queue {name} opened")


@priorityclasses_app.callback()
def classes_list(ctx: typer.Context) -> None:
    if ctx.invoked_subcommand is None:
        render(
            client(ctx).request("GET", "/api/v1/priorityclasses"),
            options(ctx).output,
            CLASS_COLUMNS,
        )


@priorityclasses_app.command("apply")
def classes_apply(ctx: typer.Context, files: FileOption) -> None:
    """Create PriorityClasses (scheduling.k8s.io/v1), or change a description or
    globalDefault."""
    api = client(ctx)
    applied = [
        api.request("PUT", f"/api/v1/priorityclasses/{doc['metadata']['name']}", json=doc)
        for doc in _documents(files, "PriorityClass")
    ]
    render({"items": applied}, options(ctx).output, CLASS_COLUMNS)


@priorityclasses_app.command("delete")
def classes_delete(ctx: typer.Context, name: str) -> None:
    client(ctx).request("DELETE", f"/api/v1/priorityclasses/{name}")
    typer.echo(f"priority class {name} deleted")
