"""`vglobal tokens`: issue, list and revoke API tokens (admin)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

import typer

from volcano_global.cli.client import Client, CliError
from volcano_global.cli.context import client, options
from volcano_global.cli.output import Column, Format, render

tokens_app = typer.Typer(
    help="API tokens: admin, reader, queue-user (lists them without a subcommand).",
    invoke_without_command=True,
)

TOKEN_COLUMNS: list[Column] = [
    ("ID", lambda t: t["id"]),
    ("NAME", lambda t: t["name"]),
    ("ROLE", lambda t: t["role"]),
    ("QUEUES", lambda t: ",".join(t["queues"]) or "-"),
    ("EXPIRES", lambda t: t["expiresAt"] or "-"),
    ("REVOKED", lambda t: t["revokedAt"] or "-"),
]


@tokens_app.callback()
def tokens_list(ctx: typer.Context) -> None:
    if ctx.invoked_subcommand is None:
        render(client(ctx).request("GET", "/api/v1/tokens"), options(ctx).output, TOKEN_COLUMNS)


@tokens_app.command("create")
def tokens_create(
    ctx: typer.Context,
    name: str,
    role: Annotated[str, typer.Option(help="admin | reader | queue-user")] = "reader",
    queue: Annotated[
        list[str] | None, typer.Option("-q", "--queue", help="queue-user: a queue it may use")
    ] = None,
    expires: Annotated[
        datetime | None, typer.Option(help="Refused after this time (UTC unless a zone is given)")
    ] = None,
) -> None:
    """Issue a token and print its secret (shown this once)."""
    body: dict[str, Any] = {"name": name, "role": role, "queues": queue or []}
    if expires is not None:
        body["expiresAt"] = (expires if expires.tzinfo else expires.astimezone()).isoformat()
    issued = client(ctx).request("POST", "/api/v1/tokens", json=body)
    if options(ctx).output is not Format.TABLE:
        render(issued, options(ctx).output, TOKEN_COLUMNS)
        return
    render(issued, Format.TABLE, TOKEN_COLUMNS)
    typer.echo(f"\ntoken (shown once): {issued['token']}")


@tokens_app.command("revoke")
def tokens_revoke(
    ctx: typer.Context, token: Annotated[str, typer.Argument(help="The token's ID or name")]
) -> None:
    """Revoke a token at once."""
    api = client(ctx)
    revoked = api.request("DELETE", f"/api/v1/tokens/{_token_id(api, token)}")
    typer.echo(f"token {revoked['name']} ({revoked['id']}) revoked")


def _token_id(api: Client, token: str) -> str:
    try:
        return str(uuid.UUID(token))
    except ValueError:
        pass
    live = [
        t
        for t in api.request("GET", "/api/v1/tokens")["items"]
        if t["name"] == token and not t["revokedAt"]
    ]
    if not live:
        raise CliError(f"no live token named {token!r}")
    if len(live) > 1:
        raise CliError(f"{len(live)} live tokens are named {token!r}: give the ID")
    return str(live[0]["id"])
