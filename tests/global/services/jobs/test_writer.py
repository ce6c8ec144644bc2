"""Group commit of submissions (SQLite and Postgres): submissions that arrive together are
written in fewer INSERTs than jobs, each with its events and audit record; a job whose row
cannot be stored fails alone, and one whose queue does not exist, or whose name a finished job
holds when it asks so, or which was checked against rules that have changed since, is refused
alone."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from collections import Counter
from collections.abc import Awaitable

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import event, func, select
from sqlalchemy.exc import IntegrityError

from tests.factories import REPLY_S, job_document, statements_seen, submit
from volcano_global.db.engine import transaction
from volcano_global.db.models import Event, Job
from volcano_global.services.events import AUDIT, event_row
from volcano_global.services.jobs.writer import WriteOutcome, Written
from volcano_global.services.tenancy.submission_rules import fingerprint


async def test_submissions_that_arrive_together_share_a_transaction(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    with statements_seen(app) as statements:
        answers = await asyncio.gather(
            *(submit(api, job_document(f"train-{i}", replicas=1)) for i in range(30))
        )
    inserts = [s for s in statements if "INSERT INTO JOBS" in s.upper()]
    assert [a.status_code for a in answers] == [201] * 30
    assert 1 <= len(inserts) < 30  # batched
    async with transaction(app.state.sessions) as session:
        assert await session.scalar(select(func.count()).select_from(Job)) == 30
        reasons = Counter(
            (
                await session.execute(
                    select(Event.reason).where(Event.reason.in_(["Submitted", AUDIT]))
                )
            ).scalars()
        )
    assert reasons == {"Submitted": 30, AUDIT: 30}
    job = (await api.get(f"/api/v1/jobs/{answers[7].json()['uid']}")).json()
    assert job["name"] == "train-7"
    assert job["state"] == "Pending"
    assert job["queue"] == "default"


async def test_a_row_that_cannot_be_stored_fails_alone(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    uids = [(await submit(api, job_document("seed", replicas=1))).json()["uid"]]
    done = (await submit(api, job_document("done", replicas=1))).json()["uid"]
    assert (await api.post(f"/api/v1/jobs/{done}/cancel")).status_code == 200
    async with transaction(app.state.sessions) as session:
        seed = await session.get(Job, uuid.UUID(uids[0]))
        assert seed is not None
        template = {c.key: getattr(seed, c.key) for c in Job.__table__.columns}
    writer = app.state.job_writer

    def row(name: str, **changes: object) -> dict:
        return template | {"id": uuid.uuid4(), "name": name} | changes

    def add(
        job: dict, queue: str = "default", refuse_finished: bool = False, mark: str | None = None
    ) -> Awaitable[Written]:
        submitted = event_row(job_id=job["id"], reason="Submitted", message="m")
        return writer.add(
            job, [submitted], queue=queue, refuse_finished=refuse_finished, rules_mark=mark
        )

    async with transaction(app.state.sessions) as session:
        mark = await fingerprint(session)

    good = [row(f"good-{i}") for i in range(5)]
    bad = row("bad", state=None)  # a NOT NULL column without a value: an integrity error
    results = await asyncio.gather(
        *(add(r) for r in good),
        add(bad),
        add(row("seed")),  # a live job has this name
        add(row("elsewhere"), queue="no-such-queue"),
        add(row("done"), refuse_finished=True),  # a finished job holds the name
        add(row("done", namespace="other"), refuse_finished=True),  # not in this namespace
        add(row("good-9"), refuse_finished=True),  # no job holds it
        add(row("checked"), mark=mark),  # checked against the rules now
        add(row("stale"), mark=mark + "0"),  # checked against rules that have changed since
        return_exceptions=True,
    )
    assert results[:5] == [Written(WriteOutcome.STORED)] * 5
    assert isinstance(results[5], IntegrityError)
    assert results[6:] == [
        Written(WriteOutcome.NAME_TAKEN),
        Written(WriteOutcome.NO_QUEUE),
        Written(WriteOutcome.FINISHED_HOLDER, "Cancelled"),
        Written(WriteOutcome.STORED),
        Written(WriteOutcome.STORED),
        Written(WriteOutcome.STORED),
        Written(WriteOutcome.STALE_RULES),
    ]
    async with transaction(app.state.sessions) as session:
        rows = {tuple(r) for r in await session.execute(select(Job.namespace, Job.name))}
        events = await session.scalar(
            select(func.count()).select_from(Event).where(Event.reason == "Submitted")
        )
    good = {(template["namespace"], n) for n in ("seed", "done", "good-9", "checked")}
    assert rows == good | {(template["namespace"], f"good-{i}") for i in range(5)} | {
        ("other", "done")
    }
    assert events == 10  # the seed's, the finished one's and the good ones': none for the rest


async def test_a_cancelled_writer_leaves_no_caller_waiting_and_is_replaced(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    writer = app.state.job_writer
    running = asyncio.all_tasks()
    callers = [
        asyncio.create_task(writer.add({"id": uuid.uuid4()}, [], queue="default")) for _ in range(3)
    ]
    await asyncio.sleep(0)  # the callers queue; the writer task is created, not yet run
    # As the event loop does on shutdown: the writer is cancelled.
    (started,) = asyncio.all_tasks() - running - set(callers)
    started.cancel()
    done, pending = await asyncio.wait(callers, timeout=5)
    assert not pending
    assert all(task.cancelled() for task in done)
    answer = await asyncio.wait_for(submit(api, job_document("after", replicas=1)), timeout=REPLY_S)
    assert answer.status_code == 201  # a new writer took over


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)  # Postgres: one statement
async def test_on_sqlite_no_other_writer_gets_between_the_batch_read_and_its_insert(
    app: FastAPI, api: httpx.AsyncClient, database_url: str
) -> None:
    """The batch compares each job's rules mark with the fingerprint it reads, then inserts:
    another process (the CLI, a second server on the same file) must not change the rules in
    between, or a job checked against the old rules is stored under the new ones."""
    seed = (await submit(api, job_document("seed", replicas=1))).json()["uid"]
    async with transaction(app.state.sessions) as session:
        row = await session.get(Job, uuid.UUID(seed))
        assert row is not None
        template = {c.key: getattr(row, c.key) for c in Job.__table__.columns}
        mark = await fingerprint(session)
    other = sqlite3.connect(database_url.removeprefix("sqlite+aiosqlite:///"), timeout=0)
    refused: list[str] = []

    def change_the_rules_first(conn: object, cursor: object, statement: str, *a: object) -> None:
        if statement.upper().startswith("INSERT INTO JOBS"):
            try:
                with other:
                    other.execute("UPDATE queues SET updated_at = '2100-01-01 00:00:00'")
            except sqlite3.OperationalError as exc:
                refused.append(str(exc))

    engine = app.state.engine.sync_engine
    event.listen(engine, "before_cursor_execute", change_the_rules_first)
    try:
        job = template | {"id": uuid.uuid4(), "name": "checked"}
        written = await app.state.job_writer.add(job, [], queue="default", rules_mark=mark)
    finally:
        event.remove(engine, "before_cursor_execute", change_the_rules_first)
        other.close()
    assert refused == ["database is locked"]  # the batch's transaction held the write lock
    assert written == Written(WriteOutcome.STORED)
    async with transaction(app.state.sessions) as session:
        assert await fingerprint(session) == mark  # stored under the rules it was checked by
