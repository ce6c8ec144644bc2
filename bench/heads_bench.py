"""What a round reads of the waiting line, with one tenant's backlog: 3,500 waiting jobs in one
queue and a few in each of 9 others (10 queues), on SQLite and Postgres.

    .venv/bin/python bench/heads_bench.py [--database-url postgresql+asyncpg://...] [--runs 20]

Prints p50/p95 (ms) of: the read before issue 38 (the first window x 16 waiting jobs of all
queues by priority and submission, on the indexes it had), the read now (each queue's first
jobs along `ix_jobs_queue_waiting`, `services/scheduling/heads.py`), and the whole snapshot
(`read_round`, planned CP-SAT policy, window 200), and how many of the other queues' jobs
each read sees."""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from in_process import admin_client, started_app, timed
from sqlalchemy import select, text

from tests.backlog import clone_jobs
from tests.factories import create_queue, job_document, submit
from volcano_global.db.base import utcnow
from volcano_global.db.engine import transaction
from volcano_global.db.models import Job, Queue
from volcano_global.services.scheduling import round_input as snapshots
from volcano_global.services.tenancy.queues import WAITING
from volcano_global.solver import Policy

TOKEN = "heads-bench-admin-token"
WINDOW = 200
BACKLOG = 3_500
OTHERS = 9  # queues besides the busy one
EACH = 20  # waiting jobs in each other queue


def before_statement():  # the statement rounds ran before issue 38
    return (
        select(Job.id, Queue.name, Job.priority, Job.total_gpus, Job.submitted_at)
        .join(Queue, Queue.id == Job.queue_id)
        .where(WAITING)
        .order_by(Job.priority.desc(), Job.submitted_at, Job.id)
        .limit(WINDOW * snapshots.PLANNED_CANDIDATES)
    )


async def main(url: str, runs: int) -> None:
    async with started_app(url, TOKEN) as app:
        async with admin_client(app, TOKEN) as api:
            for n in range(OTHERS + 1):
                await create_queue(api, f"tenant-{n}")
                document = job_document(f"job-{n}", queue=f"tenant-{n}")
                # A queue runs its own namespace's jobs (jobspec/tenancy.py).
                document["metadata"]["namespace"] = f"tenant-{n}"
                first = await submit(api, document)
                count = BACKLOG - 1 if n == 0 else EACH - 1
                await clone_jobs(app.state.sessions, first.json()["uid"], count)
        sessions = app.state.sessions
        kind = app.state.engine.dialect.name

        async def after(_: int) -> list:
            async with transaction(sessions) as session:
                heads, names = await snapshots._heads(session, WINDOW, Policy.CPSAT, utcnow())
            return [names[h.queue_id] for h in heads]

        async def whole(_: int) -> list:
            async with transaction(sessions) as session:
                data, _ = await snapshots.read_round(session, window=WINDOW, policy=Policy.CPSAT)
            return [w.request.queue for w in data.waiting]

        async def before(_: int) -> list:
            async with transaction(sessions) as session:
                return [row.name for row in await session.execute(before_statement())]

        rows = [("read_round", whole)]
        if hasattr(snapshots, "_heads"):  # absent before issue 38 (a before/after run)
            rows.insert(0, ("now: each queue's heads", after))
        results = [(label, *await timed(runs, read)) for label, read in rows]
        async with transaction(sessions) as session:  # the indexes rounds had before
            await session.execute(text("DROP INDEX IF EXISTS ix_jobs_queue_waiting"))
        results.insert(0, ("before: window x 16 of all queues", *await timed(runs, before)))
        print(f"\n{kind}: {BACKLOG} waiting in one queue, {EACH} in each of {OTHERS} others\n")
        print("| read | p50 ms | p95 ms | rows | other queues' jobs seen |")
        print("|---|---:|---:|---:|---:|")
        for label, p50, p95, queues in results:
            others = sum(1 for q in queues if q != "tenant-0")
            print(f"| {label} | {p50:.1f} | {p95:.1f} | {len(queues)} | {others} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default=None, help="default: a fresh SQLite file")
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(main(args.database_url or f"sqlite+aiosqlite:///{tmp}/bench.db", args.runs))
