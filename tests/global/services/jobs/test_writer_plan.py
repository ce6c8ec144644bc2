"""Postgres' plan of the batched submission (`services/jobs/writer.py`): the finished jobs
that may hold an incoming job's name are looked up by name, not read whole, even when the
table's statistics are from before the finished jobs piled up (a join of the incoming jobs
with every finished one made each submission read all of them: 545 shared buffers a
statement at 200 jobs/s after 6,000 jobs, 107 with the lookup; docs/benchmarks.md, session 15).
Postgres only: SQLite's batch reads the holders by name in a statement of its own."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import text

from tests.factories import job_document, submit
from volcano_global.db.models import Job
from volcano_global.services.jobs.writer import _batch_statement

FINISHED = 3000


@pytest.fixture
def database_url(postgres_url: str) -> str:
    """Postgres only: see the module's docstring."""
    from tests.conftest import empty_postgres

    asyncio.run(empty_postgres(postgres_url))
    return postgres_url


async def _finished_jobs(app: FastAPI, api: httpx.AsyncClient, count: int) -> None:
    """`count` cancelled jobs, copies of one the API stored, with no ANALYZE after them."""
    uid = (await submit(api, job_document("seed", replicas=1))).json()["uid"]
    assert (await api.post(f"/api/v1/jobs/{uid}/cancel")).status_code == 200
    columns = [c.name for c in Job.__table__.columns if c.name not in ("id", "name")]
    kept = ", ".join(columns)
    async with app.state.engine.begin() as db:
        await db.execute(
            text(
                f"INSERT INTO jobs (id, name, {kept}) SELECT gen_random_uuid(), "
                f"'done-' || g, {kept} FROM jobs, generate_series(1, :n) AS g"
            ),
            {"n": count},
        )


def _reads_of(plan: dict[str, Any], relation: str) -> list[dict[str, Any]]:
    """The plan's nodes that read `relation` (not the INSERT into it)."""
    found = []
    if plan.get("Relation Name") == relation and plan["Node Type"] != "ModifyTable":
        found.append(plan)
    for child in plan.get("Plans", []):
        found.extend(_reads_of(child, relation))
    return found


async def test_the_finished_holders_of_a_name_are_looked_up_by_name(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    await _finished_jobs(app, api, FINISHED)
    statement = _batch_statement(("id", "name", "namespace", "state", "submitted_at"), ())
    async with app.state.engine.connect() as db:
        explained = await db.execute(
            text(f"EXPLAIN (FORMAT JSON) {statement.text}"), {"jobs": "[]"}
        )
        [[document]] = explained.all()
    plan = (json.loads(document) if isinstance(document, str) else document)[0]["Plan"]
    reads = _reads_of(plan, "jobs")
    assert reads, plan
    assert {(r["Node Type"], r.get("Index Name")) for r in reads} <= {
        ("Index Scan", "ix_jobs_namespace_name"),
        ("Index Only Scan", "ix_jobs_namespace_name"),
    }, [(r["Node Type"], r.get("Index Name")) for r in reads]
