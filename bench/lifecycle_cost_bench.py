"""Server CPU per job through its whole lifecycle - submitted, placed, dispatched, running,
reported, finished - measured in-process: the app (REST, the agents' gRPC streams and the
scheduling loop) in this process, the agents of `--clusters` simulated clusters in a child
process, jobs submitted at `--rate` a second through an in-process ASGI client. The process's
CPU from the first submission until every job has finished, less what it uses idle with the
agents connected, divided by the jobs: robust to a shared machine (wall-clock rates are not).

    .venv/bin/python bench/lifecycle_cost_bench.py --database-url postgresql+asyncpg://postgres@127.0.0.1/DB
    .venv/bin/python bench/lifecycle_cost_bench.py --statements   # and the statements per job

The CPU is broken down by stage (bench/cpu_stages.py: the event loop thread's CPU of each
stage's coroutines, step by step): the submission requests (HTTP, in-process), the job writer's
batches, the scheduling rounds (supervision, read, plan, apply; CP-SAT's threads are counted
apart, as "other threads"), the dispatch (outbox rows read and turned into messages), the status
reports' transactions, the inventory deltas' transactions, the agents' other messages
(heartbeats, the deltas' reading), and the rest of the loop (gRPC and HTTP plumbing, the
bench's own polling). Each stage's idle rate (the agents connected, no jobs) is subtracted.
`--statements` counts the statements SQLAlchemy sends, by text (not the job writer's batch nor
the reads and writes that run on the driver: `db/fast_reads`, `db/copy_rows`). On a Postgres on
this machine, the CPU of the backends serving the bench's database is counted too, apart (its
idle rate subtracted; not Postgres' shared background processes: WAL writer, checkpointer)."""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import uvloop
from fastapi import FastAPI
from sqlalchemy import event, func, select, text
from sqlalchemy.engine import Engine
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

import cpu_stages  # noqa: E402
from harness import cpu_seconds  # noqa: E402
from load_requests import job  # noqa: E402

from volcano_global.app import create_app  # noqa: E402
from volcano_global.cli.gc_tuning import tune_gc  # noqa: E402
from volcano_global.db.engine import reading  # noqa: E402
from volcano_global.db.group_commit import GroupCommit  # noqa: E402
from volcano_global.db.models import Job  # noqa: E402
from volcano_global.grpc import agent_service  # noqa: E402
from volcano_global.grpc.agent_service import AgentService  # noqa: E402
from volcano_global.scheduler.loop import Scheduler  # noqa: E402
from volcano_global.services.dispatch import reports  # noqa: E402
from volcano_global.services.inventory.delta_writer import DeltaWriter  # noqa: E402
from volcano_global.services.jobs.writer import JobWriter  # noqa: E402
from volcano_global.settings import Settings  # noqa: E402

TOKEN = "vg_bench_lifecycle_cost_0123456789"


def count_stages() -> None:
    """Wrap each stage's entry points (before the app is created: it binds some of them)."""
    cpu_stages.patch(JobWriter, "_insert", "job writer batches")
    cpu_stages.patch(Scheduler, "step", "scheduling rounds")
    cpu_stages.patch(AgentService, "_unacknowledged", "dispatch (outbox to streams)")
    cpu_stages.patch(AgentService, "_undelivered", "dispatch (outbox to streams)")
    cpu_stages.patch(agent_service, "_outbox_message", "dispatch (outbox to streams)")
    cpu_stages.patch(AgentService, "_deltas", "agents' other messages")
    cpu_stages.patch(AgentService, "_handle", "agents' other messages")
    cpu_stages.patch(DeltaWriter, "_write", "inventory deltas' transactions")
    writer = reports.report_writer

    def report_writer(sessions: async_sessionmaker[AsyncSession]) -> GroupCommit:
        commit = writer(sessions)
        commit._write_batch = cpu_stages.staged("status reports", commit._write_batch)
        return commit

    reports.report_writer = report_writer  # type: ignore[assignment]


_TYPE = r"(::(TIMESTAMP WITH TIME ZONE|[A-Z]+))?"
_PARAMETERS = re.compile(rf"\$\d+{_TYPE}(, \$\d+{_TYPE})*")
POSTGRES = "Postgres backends (apart)"
STATEMENTS: dict[str, int] = {}  # statement's text, cut short -> times run


def count_statements() -> None:
    """Count every statement sent to the database by its text (`--statements`)."""

    def counted(conn: Any, cursor: Any, statement: str, parameters: Any, *args: Any) -> None:
        # An executemany runs the statement once per parameter set; a multi-row INSERT (its
        # rows' parameters in one flat sequence) is one statement.
        many = args[-1] and parameters and isinstance(parameters[0], (tuple, list, dict))
        key = _PARAMETERS.sub("$n", " ".join(statement.split()))
        if key.startswith("SELECT") and " FROM " in key:  # the columns cut, the rest kept
            key = key[:40] + " ..." + key[key.index(" FROM ") :]
        key = key[:220]
        STATEMENTS[key] = STATEMENTS.get(key, 0) + (len(parameters) if many else 1)

    event.listen(Engine, "before_cursor_execute", counted)


async def measure(args: argparse.Namespace) -> dict[str, object]:
    settings = Settings(
        database_url=args.database_url,
        admin_token=TOKEN,
        grpc_port=0,
        log_level="warning",
    )
    count_stages()
    if args.statements:
        count_statements()
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        tune_gc()  # as `vglobal server` does once started
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=_requests_counted(app)),
            base_url="http://t",
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=120,
        ) as api:
            agents = await _agents(app, api, args)
            try:
                return await _lifecycle(app, api, args)
            finally:
                agents.terminate()
                await agents.wait()


def _requests_counted(app: FastAPI) -> Callable[..., Awaitable[None]]:
    """The app, its requests' CPU counted as the submissions' (the only requests but the
    bench's few setup calls)."""

    async def asgi(scope: Any, receive: Any, send: Any) -> None:
        await app(scope, receive, send)

    return cpu_stages.staged("submission requests", asgi)


async def _agents(
    app: FastAPI, api: httpx.AsyncClient, args: argparse.Namespace
) -> asyncio.subprocess.Process:
    """The clusters, and their agents in a child process, synced."""
    tokens = {}
    for i in range(args.clusters):
        answer = await api.post("/api/v1/clusters", json={"name": f"cost-{i:02d}"})
        tokens[f"cost-{i:02d}"] = answer.json()["agentToken"]
    agents = await asyncio.create_subprocess_exec(
        sys.executable,
        str(REPO / "bench" / "load_bench.py"),
        "agents",
        f"127.0.0.1:{app.state.grpc_port}",
        json.dumps(tokens),
        str(args.nodes),
        "3600",  # seconds
        "0",  # node changes a second (the agents still make a few: in the idle baseline too)
        stdout=asyncio.subprocess.PIPE,
    )
    assert agents.stdout is not None
    assert (await agents.stdout.readline()).strip() == b"synced"
    return agents


async def _lifecycle(app: FastAPI, api: httpx.AsyncClient, args: argparse.Namespace) -> dict:
    """Idle baseline, then `rate` x `seconds` jobs submitted on schedule and waited for until
    every one has finished; the CPU per job, in all and by stage."""
    await asyncio.sleep(2.0)  # the first round and the streams' settling, not counted
    meter, before_idle, postgres_idle = _Meter(), dict(STATEMENTS), await _postgres_cpu(app)
    while meter.wall() < args.idle_s:
        await _unfinished(app)  # the baseline polls as the measured part does
    idle = {stage: seconds / meter.wall() for stage, seconds in meter.used().items()}
    idle_wall, before_load, postgres_load = meter.wall(), dict(STATEMENTS), await _postgres_cpu(app)
    idle[POSTGRES] = _used(postgres_idle, postgres_load) / idle_wall
    total = int(args.rate * args.seconds)
    meter = _Meter()
    submitting = asyncio.create_task(_submit(api, args.rate, total, args.job_seconds))
    while (left := await _unfinished(app)) or not submitting.done():
        if meter.wall() > args.timeout:
            raise TimeoutError(f"{left} of {total} jobs not finished after {args.timeout} s")
    await submitting
    wall = meter.wall()
    used = meter.used() | {POSTGRES: _used(postgres_load, await _postgres_cpu(app))}
    per_job = {
        stage: 1000 * (seconds - idle.get(stage, 0.0) * wall) / total
        for stage, seconds in used.items()
    }
    statements = {
        text: (
            n
            - before_load.get(text, 0)
            - (before_load.get(text, 0) - before_idle.get(text, 0)) * wall / idle_wall
        )
        / total
        for text, n in STATEMENTS.items()
    }
    return {
        "jobs": total,
        "wall_s": wall,
        "idle_cores": idle["all"],
        "cpu_ms_per_job": per_job,
        "statements_per_job": statements,
    }


class _Meter:
    """The process's CPU since it was made: in all, by stage on the loop's thread, the rest of
    that thread, and the other threads (CP-SAT's, gRPC's)."""

    def __init__(self) -> None:
        self._started = time.monotonic()
        self._process, self._thread = time.process_time(), time.thread_time()
        self._stages = cpu_stages.snapshot()

    def wall(self) -> float:
        return time.monotonic() - self._started

    def used(self) -> dict[str, float]:
        stages = cpu_stages.snapshot()
        used = {k: v - self._stages.get(k, 0.0) for k, v in stages.items()}
        thread = time.thread_time() - self._thread
        used["rest of the loop thread"] = thread - sum(used.values())
        used["other threads"] = time.process_time() - self._process - thread
        used["all"] = time.process_time() - self._process
        return used


async def _submit(api: httpx.AsyncClient, rate: float, total: int, seconds: float) -> None:
    """`total` jobs at `rate` a second, on schedule (open loop), each checked accepted."""
    base = time.time_ns() % 10**9 * 1000
    pending: set[asyncio.Task[httpx.Response]] = set()
    begin = time.monotonic()
    for i in range(total):
        await asyncio.sleep(max(0.0, begin + i / rate - time.monotonic()))
        pending.add(asyncio.create_task(api.post("/api/v1/jobs", json=job(base + i, seconds))))
    for answer in await asyncio.gather(*pending):
        assert answer.status_code == 201, answer.text


async def _postgres_cpu(app: FastAPI) -> dict[int, float]:
    """CPU seconds so far of each backend serving the bench's database (Postgres on this
    machine; none on SQLite)."""
    if app.state.engine.dialect.name != "postgresql":
        return {}
    query = text("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
    async with reading(app.state.sessions) as session:
        return cpu_seconds(pids=set((await session.execute(query)).scalars()))


def _used(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds between two readings (a backend started in between: all of its own)."""
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())


async def _unfinished(app: FastAPI) -> int:
    """A quarter of a second later: the jobs not finished."""
    await asyncio.sleep(0.25)
    async with reading(app.state.sessions) as session:
        query = select(func.count()).select_from(Job).where(Job.finished_at.is_(None))
        return int((await session.execute(query)).scalar_one())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=None, help="default: a fresh SQLite file")
    parser.add_argument("--rate", type=float, default=100.0, help="submissions per second")
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds of submissions")
    parser.add_argument("--clusters", type=int, default=20)
    parser.add_argument("--nodes", type=int, default=200, help="nodes per cluster (8 GPUs each)")
    parser.add_argument("--job-seconds", type=float, default=1.0, help="how long each job runs")
    parser.add_argument("--idle-s", type=float, default=3.0, help="idle baseline's length")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument(
        "--statements", action="store_true", help="count the statements per job by text"
    )
    args = parser.parse_args()
    if args.database_url is None:
        args.database_url = f"sqlite+aiosqlite:///{tempfile.mkdtemp()}/lifecycle.db"
    result = uvloop.run(measure(args))  # as `vglobal server` runs
    print(f"{result['jobs']} jobs, {result['wall_s']:.1f} s, idle {result['idle_cores']:.2f} cores")
    for stage, ms in result["cpu_ms_per_job"].items():
        print(f"{stage:>32}: {ms:6.2f} ms CPU per job")
    if args.statements:
        counts = sorted(result["statements_per_job"].items(), key=lambda item: -item[1])
        print(f"statements per job: {sum(n for _, n in counts):.2f}")
        for statement, n in counts:
            if n >= 0.005:
                print(f"{n:7.3f}  {statement}")


if __name__ == "__main__":
    main()
