"""`vglobal server`: uvicorn around the app, logging the URLs it listens on."""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import shutil
import signal
import tempfile
from typing import Any

import uvicorn
from fastapi import FastAPI
from pydantic import ValidationError

from volcano_global.api.limits import BoundedHttpProtocol
from volcano_global.cli.gc_tuning import tune_gc
from volcano_global.db.preflight import database_problem
from volcano_global.metrics import MULTIPROC_ENV
from volcano_global.settings import Settings


def run_server(
    *,
    host: str | None,
    port: int | None,
    grpc_port: int | None,
    database_url: str | None,
    workers: int | None = None,
    worker_healthcheck_timeout_s: float | None = None,
) -> None:
    given = {
        "host": host,
        "port": port,
        "grpc_port": grpc_port,
        "database_url": database_url,
        "workers": workers,
        "worker_healthcheck_timeout_s": worker_healthcheck_timeout_s,
    }
    overrides = {k: v for k, v in given.items() if v is not None}
    settings = settings_or_exit(overrides)
    refuse_unusable_database(settings.database_url)
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if not logging.getLogger().isEnabledFor(logging.DEBUG):
        # ~100 lines a fresh database's migration; `migrate.upgrade` says it in one
        logging.getLogger("alembic").setLevel(logging.WARNING)
    keep_exit_code_on_signals()
    log = logging.getLogger("volcano_global")
    scheme = "https" if settings.tls.enabled else "http"
    log.info(
        "REST API on %s://%s:%d/api/v1 (OpenAPI: /openapi.json)",
        scheme,
        settings.host,
        settings.port,
    )
    log.info("database: %s", _redact(settings.database_url))
    if settings.workers > 1:
        if settings.is_sqlite or settings.grpc_port == 0:
            raise SystemExit(
                "error: workers > 1 needs Postgres (VGLOBAL_DATABASE_URL) and a fixed gRPC port"
            )
        # Each worker process builds its settings from the environment: pass the options on.
        os.environ.update({f"VGLOBAL_{k.upper()}": str(v) for k, v in overrides.items()})
        share_metrics_between_workers()
        log.info("%d worker processes", settings.workers)
    app = "volcano_global.cli.serve:worker_app" if settings.workers > 1 else server_app(settings)
    uvicorn.run(app, **uvicorn_options(settings))


def uvicorn_options(settings: Settings) -> dict[str, Any]:
    """The arguments of `uvicorn.run` (and so of its `Config`) besides the app."""
    return dict(
        factory=settings.workers > 1,
        workers=settings.workers if settings.workers > 1 else None,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level.lower(),
        loop="uvloop",
        http=BoundedHttpProtocol,
        # The client's address is the socket peer's: uvicorn would otherwise take
        # X-Forwarded-For from any loopback peer. Proxies are trusted by audit.trusted_proxies.
        proxy_headers=False,
        # Open requests (and watch streams) get half the shutdown budget, the lifespan's stop
        # steps the other half (`app.stop_budget_s`): the process exits within the budget.
        timeout_graceful_shutdown=settings.shutdown_budget_s / 2,
        # Longer than the idle timeout of the load balancers in front (60 s is common) and of
        # HTTP clients' pools: with uvicorn's 5 s, a client reusing a connection the server
        # has just closed gets a reset (seen as ReadError in the load benchmark).
        timeout_keep_alive=75,
        ssl_certfile=settings.tls.cert_file if settings.tls.enabled else None,
        ssl_keyfile=settings.tls.key_file if settings.tls.enabled else None,
        # With workers > 1, uvicorn's supervisor kills a worker that misses a health check;
        # its 5 s default killed workers that were only busy on a loaded 2-core host.
        timeout_worker_healthcheck=settings.worker_healthcheck_timeout_s,
    )


def settings_or_exit(overrides: dict[str, Any]) -> Settings:
    """The settings, or one line per setting the environment or flags got wrong."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        lines = [
            f"error: {'.'.join(map(str, e['loc'])) or 'settings'}: {e['msg']}" for e in exc.errors()
        ]
        raise SystemExit("\n".join(lines)) from None


def refuse_unusable_database(url: str) -> None:
    """Exit with one line when the database cannot be used (see `db.preflight`)."""
    problem = asyncio.run(database_problem(url))
    if problem:
        raise SystemExit(f"error: {problem}")


def share_metrics_between_workers() -> None:
    """One fresh PROMETHEUS_MULTIPROC_DIR for this server's workers, removed when it exits:
    /metrics then sums every worker's counters whichever worker a scrape reaches (a directory
    left by an earlier run would add its counts)."""
    directory = tempfile.mkdtemp(prefix="vglobal-metrics-")
    os.environ[MULTIPROC_ENV] = directory
    atexit.register(shutil.rmtree, directory, ignore_errors=True)


def keep_exit_code_on_signals() -> None:
    """A SIGTERM or SIGINT ends the server with exit code 0. While uvicorn runs, its own
    handlers take them (graceful shutdown; a second signal hurries it); after its clean stop
    uvicorn raises the signal again for the handler it found, where Python's default would kill
    the process (exit -15): this one takes it. Before uvicorn starts (the app is still being
    built: seconds of imports, a minute on a loaded host) it ends the process at once, as there
    is nothing to drain yet: a handler that only logged there lost the signal, and the server
    then ran on after the SIGTERM that should have stopped it."""

    def stopped(signum: int, _frame: object) -> None:
        logging.getLogger("volcano_global").info("stopped on %s", signal.Signals(signum).name)
        raise SystemExit(0)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, stopped)


def worker_app() -> FastAPI:
    """The app of one worker process (each builds its settings from the environment)."""
    return server_app(None)


def server_app(settings: Settings | None) -> FastAPI:
    """The app of a server process: the API, then the collector tuned for what it built."""
    # Imported here, not at the top: with workers > 1 the supervisor process never builds an
    # app, and the import alone would hold ~100 MiB in it for nothing (docs/benchmarks.md,
    # "Two workers").
    from volcano_global.app import create_app

    app = create_app(settings)
    limits = app.state.settings.limits
    BoundedHttpProtocol.configure(
        max_header_bytes=limits.max_header_bytes,
        max_headers=limits.max_headers,
        header_timeout_s=limits.header_timeout_s,
    )
    tune_gc()
    return app


def _redact(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)
