"""Locking jobs for a writer that only moves them through their lifecycle (the status
reports') leaves out what the parser derived for placing them: each is a model validated as it
is read, and such a writer reads none of them."""

from __future__ import annotations

import uuid

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import event, inspect, select
from sqlalchemy.exc import DBAPIError, InvalidRequestError

from tests.factories import job_document, submit
from volcano_global.db.models import Job, JobState
from volcano_global.services.lifecycle import jobs as lifecycle_jobs
from volcano_global.services.lifecycle.jobs import lifecycle_of, lock_jobs

DOCUMENT = {"source", "gang", "communication", "split_policy"}


async def test_jobs_locked_without_their_documents(app: FastAPI, api: httpx.AsyncClient) -> None:
    uid = uuid.UUID((await submit(api, job_document("lean"))).json()["uid"])
    async with app.state.sessions() as session:
        job = (await lock_jobs(session, [uid], documents=False))[uid]
        assert job.state is JobState.PENDING
        assert lifecycle_of(job).max_retry == job.max_retry  # the lifecycle is there
        assert DOCUMENT <= inspect(job).unloaded
        with pytest.raises(InvalidRequestError):
            job.gang  # noqa: B018 (raises instead of querying)
        await session.rollback()
    async with app.state.sessions() as session:
        job = (await lock_jobs(session, [uid]))[uid]
        assert not DOCUMENT & inspect(job).unloaded
        assert job.gang.total_pods == job.total_pods


async def test_many_jobs_locked_a_part_at_a_time(
    app: FastAPI, api: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A round locks hundreds of jobs: a part of them a statement, so the event loop is not
    held while all of them are loaded. Every job asked for is there, locked (Postgres: a
    second transaction cannot take any of them), asked for twice or not."""
    monkeypatch.setattr(lifecycle_jobs, "LOCKED_PER_READ", 2)
    uids = [
        uuid.UUID((await submit(api, job_document(f"part-{i}"))).json()["uid"]) for i in range(5)
    ]
    statements: list[str] = []
    engine = app.state.engine.sync_engine
    note = lambda *args: statements.append(args[2])  # noqa: E731 (before_cursor_execute)
    event.listen(engine, "before_cursor_execute", note)
    try:
        async with app.state.sessions() as session, session.begin():
            jobs = await lock_jobs(session, [*reversed(uids), uids[0]], documents=False)
            assert set(jobs) == set(uids)
            if engine.dialect.name == "postgresql":
                async with app.state.sessions() as probe, probe.begin():
                    for uid in uids:
                        with pytest.raises(DBAPIError, match="could not obtain lock"):
                            async with probe.begin_nested():
                                await probe.execute(
                                    select(Job.id).where(Job.id == uid).with_for_update(nowait=True)
                                )
    finally:
        event.remove(engine, "before_cursor_execute", note)
    assert sum("FROM jobs" in s and "WHERE jobs.id IN" in s for s in statements) == 3
