"""`vglobal`: run the Global server and talk to it."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Annotated, Any

import click
import typer
from typer.core import TyperCommand, TyperGroup

from core_agent.cli import agent as agent_command
from volcano_global.cli import certs as certs_command
from volcano_global.cli import demo as demo_command
from volcano_global.cli import describe as describe_command
from volcano_global.cli import kubeconfig as kubeconfig_command
from volcano_global.cli import plan as plan_command
from volcano_global.cli import resources, tenancy, tokens
from volcano_global.cli.argv import hoist_output
from volcano_global.cli.client import CliError
from volcano_global.cli.context import Options
from volcano_global.cli.output import Format

# Commands whose modules take long to import (`simulate`: the simulator and the solver, ~0.3 s)
# are imported only when run, not by every other command: name -> (module, one-line help).
LAZY_COMMANDS = {
    "simulate": (
        "volcano_global.cli.simulate",
        "What-if: replay a job trace through the scheduler's queue order and placement engine.",
    ),
}


class _Commands(TyperGroup):
    """The command list with LAZY_COMMANDS: listed from their line of help, imported when one
    of them is the command to run (its own --help included)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*super().list_commands(ctx), *(n for n in LAZY_COMMANDS if n not in self.commands)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is None and cmd_name in LAZY_COMMANDS:
            return TyperCommand(cmd_name, help=LAZY_COMMANDS[cmd_name][1])
        return command

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        if args and args[0] in LAZY_COMMANDS and args[0] not in self.commands:
            module = importlib.import_module(LAZY_COMMANDS[args[0]][0])
            one = typer.Typer(add_completion=False, rich_markup_mode="markdown")
            one.command(args[0])(getattr(module, args[0]))
            self.commands[args[0]] = typer.main.get_command(one)
        return super().resolve_command(ctx, args)


app = typer.Typer(
    cls=_Commands,
    help="Volcano Global: one control plane for the GPU clusters you have.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    # Rich's markup mode keeps a docstring's line breaks in the command list; plain text
    # joins a paragraph's lines, as the terminal's width then wraps them.
    rich_markup_mode="markdown",
)


def _print_version(value: bool) -> None:
    if value:
        from volcano_global import __version__

        typer.echo(f"vglobal {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    ctx: typer.Context,
    server: Annotated[
        str | None, typer.Option(help="Global REST address [env: VGLOBAL_SERVER]")
    ] = None,
    token: Annotated[str | None, typer.Option(help="Bearer token [env: VGLOBAL_TOKEN]")] = None,
    config: Annotated[Path | None, typer.Option(help="Config file with server and token")] = None,
    output: Annotated[
        Format, typer.Option("-o", "--output", help="Output format (here or after the command)")
    ] = Format.TABLE,
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the version and exit", callback=_print_version, is_eager=True
        ),
    ] = False,
) -> None:
    ctx.obj = Options(server=server, token=token, config=config, output=output)


@app.command()
def server(
    host: Annotated[
        str | None, typer.Option(help="REST listen address [env: VGLOBAL_HOST]")
    ] = None,
    port: Annotated[int | None, typer.Option(help="REST listen port [env: VGLOBAL_PORT]")] = None,
    grpc_port: Annotated[
        int | None, typer.Option(help="Agent gRPC listen port [env: VGLOBAL_GRPC_PORT]")
    ] = None,
    database_url: Annotated[
        str | None, typer.Option(help="Database URL [env: VGLOBAL_DATABASE_URL]")
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(help="Server processes (Postgres only) [env: VGLOBAL_WORKERS]", min=1),
    ] = None,
    worker_healthcheck_timeout_s: Annotated[
        float | None,
        typer.Option(
            help="Seconds a worker may take to answer its health check before it is replaced "
            "[env: VGLOBAL_WORKER_HEALTHCHECK_TIMEOUT_S, default 30]"
        ),
    ] = None,
) -> None:
    """Run the Global server (migrates the database on start)."""
    from volcano_global.cli.serve import run_server

    run_server(
        host=host,
        port=port,
        grpc_port=grpc_port,
        database_url=database_url,
        workers=workers,
        worker_healthcheck_timeout_s=worker_healthcheck_timeout_s,
    )


@app.command()
def scheduler(
    database_url: Annotated[
        str | None, typer.Option(help="Database URL, Postgres [env: VGLOBAL_DATABASE_URL]")
    ] = None,
    interval_s: Annotated[
        float,
        typer.Option(
            help="How often to look for waiting jobs (Volcano's --schedule-period is 1 s too); "
            "while a backlog is worked off rounds follow each other at once",
            min=0.05,
        ),
    ] = 1.0,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            help="Serve Prometheus metrics (rounds, placements, leadership, process) on this "
            "port, on VGLOBAL_HOST",
            min=1,
            max=65535,
        ),
    ] = None,
) -> None:
    """Run only the scheduling loop (API replicas then run with
    VGLOBAL_SCHEDULING__ENABLED=false): rounds never hold up requests."""
    from volcano_global.cli.scheduler import run_scheduler

    run_scheduler(database_url=database_url, interval_s=interval_s, metrics_port=metrics_port)


app.command()(demo_command.demo)
app.command()(certs_command.certs)
app.command()(kubeconfig_command.kubeconfig)
app.command()(agent_command)
app.command()(plan_command.plan)
for command in resources.COMMANDS:
    app.command()(command)
app.command()(describe_command.describe)
app.add_typer(resources.clusters_app, name="clusters")
app.add_typer(resources.links_app, name="links")
app.add_typer(resources.queues_app, name="queues")
app.add_typer(tenancy.priorityclasses_app, name="priorityclasses")
app.add_typer(tokens.tokens_app, name="tokens")


def run() -> Any:
    try:
        return app(args=hoist_output(sys.argv[1:]))
    except CliError as exc:
        typer.secho(f"error: {exc}", fg="red", err=True)
        sys.exit(1)


if __name__ == "__main__":
    run()
