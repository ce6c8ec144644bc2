"""Options shared by every command, and a client built from them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import typer

from volcano_global.cli.client import Client, resolve_connection
from volcano_global.cli.output import Format


@dataclass(frozen=True)
class Options:
    server: str | None
    token: str | None
    config: Path | None
    output: Format


def options(ctx: typer.Context) -> Options:
    root = ctx.find_root()
    assert isinstance(root.obj, Options)
    return root.obj


def client(ctx: typer.Context) -> Client:
    opts = options(ctx)
    return Client(resolve_connection(opts.server, opts.token, opts.config))
