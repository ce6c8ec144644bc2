"""`vglobal scheduler`: the scheduling loop in a process of its own, serving no requests and no
agent streams, so its rounds (tens of thousands of leaves on a large federation) never hold up
an API replica's event loop. Run the API replicas with `VGLOBAL_SCHEDULING__ENABLED=false`.
Postgres only: leadership is a Postgres advisory lock, so several such processes are safe (one
leads). Nothing wakes this process on a submission: it looks for waiting jobs every
`--interval-s` (one indexed query when nothing waits). Commits of other processes that may
let a job run (a cancel, a queue change, an agent's report of freed GPUs) wake it at once
(Postgres NOTIFY, `services/wakeups.py`)."""

from __future__ import annotations

import asyncio
import logging
import signal

import uvloop
from prometheus_client import start_http_server

from volcano_global.background import Background, event_loop_lag, scheduling_loops
from volcano_global.cli.gc_tuning import tune_gc
from volcano_global.cli.serve import refuse_unusable_database
from volcano_global.db.engine import create_engine, create_session_factory
from volcano_global.metrics import Metrics
from volcano_global.scheduler.loop import Scheduler
from volcano_global.settings import Settings
from volcano_global.shutdown import Deadline, bounded

log = logging.getLogger("volcano_global.scheduler")


def run_scheduler(
    *, database_url: str | None, interval_s: float, metrics_port: int | None = None
) -> None:
    settings = Settings(**({"database_url": database_url} if database_url else {}))
    if settings.is_sqlite:
        raise SystemExit(
            "error: a separate scheduler process needs Postgres (VGLOBAL_DATABASE_URL)"
        )
    refuse_unusable_database(settings.database_url)
    settings.scheduling.interval_s = interval_s
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    uvloop.run(_schedule(settings, metrics_port))


async def _schedule(settings: Settings, metrics_port: int | None) -> None:
    engine = create_engine(settings.database_url, pool_size=4)  # leadership, rounds, slack
    metrics = Metrics()
    # Nothing else runs here: rounds may follow each other while jobs wait.
    scheduler = Scheduler(engine, create_session_factory(engine), settings, metrics, busy_share=1.0)
    if metrics_port is not None:
        # Prometheus text on every path of this port, from a thread of its own.
        start_http_server(metrics_port, addr=settings.host, registry=metrics.registry)
        log.info("metrics on %s:%d", settings.host, metrics_port)
    tune_gc()
    stopping = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(sig, stopping.set)
    background = Background(
        [*scheduling_loops(settings, engine, scheduler), event_loop_lag(metrics)]
    )
    log.info("scheduling (looking for waiting jobs every %.2f s)", settings.scheduling.interval_s)
    try:
        await stopping.wait()
    finally:
        deadline = Deadline(settings.shutdown_budget_s)
        await background.stop(deadline)
        await bounded(scheduler.stop(), name="scheduler", deadline=deadline)
        await bounded(engine.dispose(), name="database pool", deadline=deadline)
