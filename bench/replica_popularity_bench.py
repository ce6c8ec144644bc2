"""What a round's popularity read costs the database (issue 33, replicas on the server):
10,000 jobs submitted within the reads window, half reading corpus-v3 by a DataSourceClaim,
half by their declaration (`communication.datasets`), 20 DataSources, on SQLite and Postgres.

    .venv/bin/python bench/replica_popularity_bench.py [--database-url postgresql+asyncpg://...]
        [--jobs 10000] [--runs 10]

Prints p50/p95 (ms) of `services.data.replicas.popularity` (the claims' jobs, the
declarations' datasets, the DataSources) and of `barred_replicas`, the two reads a round adds
when `scheduling.data.replicate_readers` is above 0."""

from __future__ import annotations

import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from in_process import admin_client, run_on_database, started_app, timed
from sqlalchemy import insert, select, update

from tests.backlog import clone_jobs
from tests.data_documents import data_source
from tests.factories import job_document, submit
from volcano_global.db.engine import transaction
from volcano_global.db.models import DataSourceClaimRow, Job
from volcano_global.services.data.replicas import barred_replicas, popularity

TOKEN = "replica-popularity-bench-admin-token"
SOURCES = 20


async def fill(app, api, jobs: int) -> None:  # type: ignore[no-untyped-def]
    documents = [data_source(f"corpus-{n}", clusters=("west",), size="1Ti") for n in range(SOURCES)]
    response = await api.post(
        "/api/v1/apply",
        content=yaml.safe_dump_all(documents),
        headers={"Content-Type": "application/yaml"},
    )
    assert response.status_code == 200, response.text
    document = job_document("reader", replicas=1)
    document["metadata"]["namespace"] = "default"  # the default queue's namespace
    response = await submit(api, document)
    assert response.status_code == 201, response.text
    await clone_jobs(app.state.sessions, response.json()["uid"], jobs - 1)
    async with transaction(app.state.sessions) as session:
        rows = (await session.execute(select(Job.id, Job.namespace, Job.name))).all()
        claimed, declared = rows[: len(rows) // 2], rows[len(rows) // 2 :]
        claims = [
            {
                "id": uuid.uuid4(),
                "name": f"{name}-corpus",
                "namespace": namespace,
                "system": "s3",
                "data_source_type": "dataset",
                "data_source_name": f"corpus-{n % SOURCES}",
                "workload_kind": "Job",
                "workload_name": name,
                "document": {},
            }
            for n, (_, namespace, name) in enumerate(claimed)
        ]
        for start in range(0, len(claims), 1000):
            await session.execute(insert(DataSourceClaimRow), claims[start : start + 1000])
        for n, (job_id, _, _) in enumerate(declared):
            said = {"datasets": [{"name": f"corpus-{n % SOURCES}"}]}
            await session.execute(update(Job).where(Job.id == job_id).values(communication=said))


async def main(url: str, jobs: int, runs: int) -> None:
    async with started_app(url, TOKEN) as app:
        async with admin_client(app, TOKEN) as api:
            await fill(app, api, jobs)
        sessions = app.state.sessions
        since = datetime.now(UTC) - timedelta(days=1)

        async def popular(_: int) -> str:
            async with transaction(sessions) as session:
                found = await popularity(session, since=since)
            return f"{len(found)} datasets, {sum(p.readers for p in found.values())} reads"

        async def barred(_: int) -> int:
            async with transaction(sessions) as session:
                return len(
                    await barred_replicas(session, now=datetime.now(UTC), names=["corpus-0"])
                )

        kind = app.state.engine.dialect.name
        print(f"\n{kind}: {jobs} jobs within the window, {SOURCES} DataSources\n")
        print("| step | p50 ms | p95 ms | result |")
        print("|---|---:|---:|---|")
        for label, step in (("popularity", popular), ("barred_replicas", barred)):
            p50, p95, result = await timed(runs, step)
            print(f"| {label} | {p50:.0f} | {p95:.0f} | {result} |", flush=True)


if __name__ == "__main__":
    run_on_database(main, __doc__.splitlines()[0])
