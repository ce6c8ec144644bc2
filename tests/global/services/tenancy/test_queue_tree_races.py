"""The queue tree under concurrent changes: two queues made each other's parent at the same
time (Postgres: two transactions at once) end with one refused as a cycle, and a job that got
into a queue which then became a parent is held by the scheduler with a reason instead of
running outside a leaf."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from fastapi import FastAPI
from sqlalchemy import update
from sqlalchemy.ext.asyncio import async_sessionmaker

from tests.factories import job_document, submit
from volcano_global.db.engine import create_engine, transaction
from volcano_global.db.models import Queue
from volcano_global.errors import Invalid
from volcano_global.jobspec.queue_document import read_queue
from volcano_global.services.tenancy.queues import apply_queue


def queue(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": 1, **spec},
    }


async def test_two_queues_made_each_others_parent_at_once_leave_no_cycle(
    postgres_url: str,
) -> None:
    engine = create_engine(postgres_url)
    sessions = async_sessionmaker(engine, expire_on_commit=False)
    try:
        for name in ("a", "b"):
            async with transaction(sessions) as session:
                await apply_queue(session, definition=read_queue(queue(name)))

        async def make(child: str, parent: str) -> str:
            try:
                async with transaction(sessions) as session:
                    await apply_queue(session, definition=read_queue(queue(child, parent=parent)))
                    await asyncio.sleep(0.2)  # both are inside their transaction at once
                return "applied"
            except Invalid as exc:
                return str(exc)

        results = await asyncio.gather(make("a", "b"), make("b", "a"))
        assert sorted(r == "applied" for r in results) == [False, True], results
        assert any("a cycle" in r for r in results), results
    finally:
        async with transaction(sessions) as session:
            await session.execute(update(Queue).values(parent=None))
        await engine.dispose()


async def test_a_job_in_a_queue_that_became_a_parent_waits_with_a_reason(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    assert (await api.post("/api/v1/queues", json=queue("team"))).status_code == 201
    uid = (await submit(api, job_document("stray", queue="team"))).json()["uid"]
    # The race's outcome, written directly: a child queue made while the job was inserted.
    async with transaction(app.state.sessions) as session:
        await apply_queue(session, definition=read_queue(queue("sub")))
        await session.execute(update(Queue).where(Queue.name == "sub").values(parent="team"))
    await app.state.scheduler.run_once()
    job = (await api.get(f"/api/v1/jobs/{uid}")).json()
    assert job["state"] == "Pending"
    assert job["pendingReason"].startswith("queue 'team' has child queues"), job
