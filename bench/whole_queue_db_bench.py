"""What a round that considers every waiting job costs the database (issue 35 item 2): 10,000
waiting jobs in 10 queues (copies of a 2 x 8-GPU job and of a 20 x 8-GPU one), one member
cluster of 80 GPUs, on SQLite and Postgres.

    .venv/bin/python bench/whole_queue_db_bench.py [--database-url postgresql+asyncpg://...]
        [--jobs 10000] [--runs 10]

Prints p50/p95 (ms) of: the narrow read of the whole line (`heads.waiting_rows`: ten
columns, no document); `read_round` with the whole queue and with the window only (planned
CP-SAT policy, window 200); and the pending reasons of every waiting job written as a round's
commit writes them (`pending_reasons.write_reasons`: one executemany UPDATE), when every reason
changed and when none did, against setting them on the loaded, locked rows as the commit did
before (`lock_jobs` and a flush)."""

from __future__ import annotations

import sys
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from in_process import admin_client, run_on_database, started_app, timed
from sqlalchemy import select

from tests.backlog import clone_jobs
from tests.factories import create_cluster, create_queue, inventory, job_document, submit
from volcano_global.db.engine import transaction
from volcano_global.db.models import Job
from volcano_global.services.lifecycle.jobs import lock_jobs
from volcano_global.services.scheduling.heads import waiting_rows
from volcano_global.services.scheduling.pending_reasons import write_reasons
from volcano_global.services.scheduling.round_input import read_round
from volcano_global.solver import Policy, SolveOptions
from volcano_global.solver.round_plan import RoundOptions

TOKEN = "whole-queue-bench-admin-token"
WINDOW = 200
QUEUES = 10


async def fill(app, api: httpx.AsyncClient, jobs: int) -> None:  # type: ignore[no-untyped-def]
    await create_cluster(api, "east")
    body = inventory("east", tors=2, nodes_per_tor=5)
    assert (await api.put("/api/v1/clusters/east/inventory", json=body)).status_code == 200
    each = jobs // QUEUES
    for n in range(QUEUES):
        queue = f"tenant-{n}"
        await create_queue(api, queue)
        uids = []
        for name, replicas in ((f"small-{n}", 2), (f"big-{n}", 20)):
            document = job_document(name, queue=queue, replicas=replicas)
            document["metadata"]["namespace"] = queue  # a queue runs its own namespace's jobs
            response = await submit(api, document)
            assert response.status_code == 201, response.text
            uids.append(response.json()["uid"])
        await clone_jobs(app.state.sessions, uids[0], each // 2 - 1)
        await clone_jobs(app.state.sessions, uids[1], each - each // 2 - 1)


async def main(url: str, jobs: int, runs: int) -> None:
    async with started_app(url, TOKEN) as app:
        async with admin_client(app, TOKEN) as api:
            await fill(app, api, jobs)
        sessions = app.state.sessions
        kind = app.state.engine.dialect.name
        async with transaction(sessions) as session:
            ids = list((await session.execute(select(Job.id))).scalars())

        async def narrow(_: int) -> int:
            async with transaction(sessions) as session:
                return len(await waiting_rows(session))

        def reading(whole: bool):  # type: ignore[no-untyped-def]
            options = RoundOptions(solve=SolveOptions(window=WINDOW), whole_queue=whole)

            async def read(_: int) -> str:
                async with transaction(sessions) as session:
                    data, _ = await read_round(
                        session, window=WINDOW, policy=Policy.CPSAT, options=options
                    )
                return f"{len(data.waiting)} in full, {len(data.beyond)} by their columns"

            return read

        async def batch(i: int) -> int:
            async with transaction(sessions) as session:
                await write_reasons(session, {key: f"waiting (round {i})" for key in ids})
            return len(ids)

        async def unchanged(_: int) -> int:
            async with transaction(sessions) as session:
                await write_reasons(session, {key: "waiting, as before" for key in ids})
            return len(ids)

        async def rows(i: int) -> int:
            async with transaction(sessions) as session:
                for job in (await lock_jobs(session, ids)).values():
                    job.pending_reason = f"waiting (ORM round {i})"
            return len(ids)

        steps = [
            ("narrow read of every waiting job (heads.waiting_rows)", narrow),
            ("read_round, whole queue", reading(True)),
            ("read_round, window only", reading(False)),
            ("reasons, one executemany UPDATE, every reason new", batch),
            ("reasons, one executemany UPDATE, none changed", unchanged),
            ("reasons on the locked, loaded rows (lock_jobs, flush), every reason new", rows),
        ]
        await unchanged(0)  # so that "none changed" finds them written
        print(f"\n{kind}: {jobs} waiting jobs in {QUEUES} queues, one cluster of 80 GPUs\n")
        print("| step | p50 ms | p95 ms | result |")
        print("|---|---:|---:|---|")
        for label, step in steps:
            if "none changed" in label:
                await unchanged(0)
            p50, p95, result = await timed(runs, step)
            print(f"| {label} | {p50:.0f} | {p95:.0f} | {result} |", flush=True)


if __name__ == "__main__":
    run_on_database(main, __doc__.splitlines()[0])
