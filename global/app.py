"""The Global server application: migrations and bootstrap on start, then the REST API."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from volcano_global import __version__
from volcano_global.api import (
    apply,
    clusters,
    console,
    data,
    health,
    history,
    jobs,
    links,
    overview,
    priority_classes,
    queues,
    tokens,
)
from volcano_global.api.errors import install_error_handlers
from volcano_global.api.jobs import read_tenancy
from volcano_global.api.kube import discovery as kube_discovery
from volcano_global.api.kube import events as kube_events
from volcano_global.api.kube import openapi as kube_openapi
from volcano_global.api.kube import resources as kube_resources
from volcano_global.api.limits import BodyLimitMiddleware
from volcano_global.api.rate_limit import RateLimitMiddleware, TokenBuckets
from volcano_global.background import Background, server_loops
from volcano_global.db import checkpoints, migrate
from volcano_global.db.engine import create_engine, create_session_factory, transaction
from volcano_global.db.locks import BOOTSTRAP_LOCK_KEY, advisory_xact_lock
from volcano_global.grpc.server import start_grpc_server
from volcano_global.metrics import Metrics, MetricsMiddleware
from volcano_global.scheduler.loop import Scheduler
from volcano_global.services.inventory import heartbeat_writer
from volcano_global.services.inventory.delta_writer import DeltaWriter
from volcano_global.services.inventory.heartbeat_writer import HeartbeatWriter
from volcano_global.services.jobs import pending_limits
from volcano_global.services.jobs.outside_tenancy import cancel_waiting_outside_tenancy
from volcano_global.services.jobs.writer import JobWriter
from volcano_global.services.kube.feed import ChangeFeed
from volcano_global.services.tenancy.priority_classes import seed_priority_classes
from volcano_global.services.tenancy.queues import ensure_queue
from volcano_global.services.tenancy.tokens import ensure_admin_token
from volcano_global.settings import Settings, get_settings
from volcano_global.shutdown import Deadline, bounded

if TYPE_CHECKING:
    import grpc

log = logging.getLogger("volcano_global")


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with _serving(app, settings):
            yield

    app = FastAPI(
        title="Volcano Global",
        version=__version__,
        description="Federated multi-cluster control plane for large-scale LLM training.",
        lifespan=lifespan,
        # No redirect from `/path/` to `/path`: it would echo the request's Host header.
        redirect_slashes=False,
        docs_url="/docs" if settings.api_docs else None,
        redoc_url="/redoc" if settings.api_docs else None,
    )
    app.state.settings = settings
    app.state.metrics = Metrics()
    install_error_handlers(app)
    _include_routers(app)
    console.mount(app)
    _add_middleware(app, settings)
    return app


@asynccontextmanager
async def _serving(app: FastAPI, settings: Settings) -> AsyncIterator[None]:
    """The server's life: migrate and bootstrap, start the agent gRPC server and the loops,
    serve, then stop them within the shutdown budget and close the database pool."""
    async with _database(settings) as engine:
        if settings.migrate_on_start:
            await migrate.upgrade(engine)
        sessions = create_session_factory(engine)
        generated = await _bootstrap(sessions, settings)
        if generated:
            announce_admin_token(generated)
        app.state.engine = engine
        app.state.sessions = sessions
        app.state.job_writer = JobWriter(sessions)
        pending_limits.install(app.state.job_writer, _pending_limits(sessions, settings))
        app.state.delta_writer = DeltaWriter(sessions, max_nodes=settings.limits.max_cluster_nodes)
        timeout_s = settings.agents.heartbeat_timeout_s
        app.state.heartbeat_writer = HeartbeatWriter(
            sessions, delay_s=heartbeat_writer.delay_for(timeout_s), stale_s=timeout_s
        )
        grpc_server, app.state.grpc_port = await start_grpc_server(
            sessions=sessions,
            settings=settings,
            deltas=app.state.delta_writer,
            heartbeats=app.state.heartbeat_writer,
        )
        log.info(
            "agent gRPC on %s:%d (%s)",
            settings.host,
            app.state.grpc_port,
            "TLS: agents need --ca-file" if settings.tls.agents_enabled else "plaintext",
        )
        app.state.kube_feed = ChangeFeed(
            sessions, poll_s=settings.kube.watch_poll_s, settle_s=settings.kube.watch_settle_s
        )
        scheduler = Scheduler(engine, sessions, settings, app.state.metrics)
        app.state.scheduler = scheduler
        background = Background(
            server_loops(
                settings=settings,
                engine=engine,
                sessions=sessions,
                scheduler=scheduler,
                kube_feed=app.state.kube_feed,
                metrics=app.state.metrics,
            )
        )
        try:
            yield
        finally:
            await _stop(app, settings, background, scheduler, grpc_server)


@asynccontextmanager
async def _database(settings: Settings) -> AsyncIterator[AsyncEngine]:
    """The server's engine, closed at the end; on an SQLite file, with its log checkpointed in
    a thread of its own (`db/checkpoints.py`)."""
    path = checkpoints.sqlite_file(settings.database_url)
    engine = create_engine(
        settings.database_url,
        pool_size=settings.db_pool_size,
        background_checkpoints=path is not None,
    )
    checkpointer = checkpoints.Checkpointer(path) if path is not None else None
    if checkpointer is not None:
        checkpointer.start()
    try:
        yield engine
    finally:
        if checkpointer is not None:
            await asyncio.to_thread(checkpointer.stop, 1.0)
        # A second of its own: connections are closed even after a step that overran.
        await bounded(engine.dispose(), name="database pool", deadline=Deadline(1.0))


async def _bootstrap(sessions: async_sessionmaker[AsyncSession], settings: Settings) -> str | None:
    """What every replica makes sure of on start, one replica at a time; returns the admin
    token when one was generated."""
    async with transaction(sessions) as session:
        await advisory_xact_lock(session, BOOTSTRAP_LOCK_KEY)
        await ensure_queue(session, name=settings.scheduling.default_queue)
        await seed_priority_classes(session, seeds=settings.scheduling.priority_classes)
        await cancel_waiting_outside_tenancy(session, rules=await read_tenancy(session, settings))
        return None if settings.admin_token else await ensure_admin_token(session)


async def _stop(
    app: FastAPI,
    settings: Settings,
    background: Background,
    scheduler: Scheduler,
    grpc_server: grpc.aio.Server,
) -> None:
    """Stop the loops, the watches, the scheduler, then the agents' gRPC server, by one deadline."""
    deadline = Deadline(stop_budget_s(settings))
    await background.stop(deadline)
    watches = getattr(app.state, "kube_watches", None)  # made by the first watch
    if watches is not None:
        await bounded(watches.stop(), name="watch token checks", deadline=deadline)
    await bounded(scheduler.stop(), name="scheduler", deadline=deadline)
    grace = min(settings.agents.shutdown_grace_s, deadline.left() / 2)
    await bounded(grpc_server.stop(grace=grace), name="agent gRPC", deadline=deadline)
    await bounded(app.state.heartbeat_writer.close(), name="heartbeats", deadline=deadline)


def _include_routers(app: FastAPI) -> None:
    # FastAPI tries the routers in order, each by matching every route of it: the jobs API,
    # most of the traffic, first.
    for module in (
        jobs,
        health,
        clusters,
        links,
        queues,
        priority_classes,
        overview,
        history,
        tokens,
        data,
        apply,
    ):
        app.include_router(module.router)
    # kubectl's API under its own prefix (docs/kubectl.md).
    for module in (kube_resources, kube_discovery, kube_openapi, kube_events):
        app.include_router(module.router)


def _add_middleware(app: FastAPI, settings: Settings) -> None:
    app.add_middleware(
        BodyLimitMiddleware,
        default_limit=settings.limits.max_job_bytes,
        inventory_limit=settings.limits.max_inventory_bytes,
    )
    if settings.rate_limit.enabled:
        app.add_middleware(
            RateLimitMiddleware,
            buckets=TokenBuckets(settings.rate_limit.rate_per_s, settings.rate_limit.burst),
            admin_token=settings.admin_token.get_secret_value() if settings.admin_token else None,
        )
    app.add_middleware(MetricsMiddleware, metrics=app.state.metrics)


def _pending_limits(
    sessions: async_sessionmaker[AsyncSession], settings: Settings
) -> pending_limits.PendingLimits:
    limits = settings.limits
    defaults = pending_limits.Limits(limits.max_pending_jobs, limits.max_pending_bytes)
    return pending_limits.PendingLimits(sessions, defaults, limits.pending_refresh_s)


def stop_budget_s(settings: Settings) -> float:
    """The lifespan's share of the shutdown budget: the HTTP server had the first half to let
    open requests finish (`cli/serve.py`)."""
    return settings.shutdown_budget_s / 2


def announce_admin_token(token: str) -> None:
    """Print a generated admin token once; only its hash is stored."""
    log.warning("generated the admin token (shown once, stored hashed)")
    print(f"\n  Admin token (save it now, it is not shown again):\n    {token}\n", file=sys.stderr)
