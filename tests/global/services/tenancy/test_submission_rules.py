"""The rules a submission is checked against (priority classes, the queues' tenancy) are read
again only when queues or classes changed, and a change made through another replica's
connection applies to the next submission (issue 35: three reads per submission, then one).
`POST /api/v1/jobs` reads nothing of its own: the job writer's batch finds whether the rules a
job was checked against moved, and a refusal is checked against the rules read again."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
import yaml
from fastapi import FastAPI
from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncSession

from tests.factories import job_document, statements_seen, submit
from tests.factories import queue_document as queue
from volcano_global.api.jobs import RULE_CHANGES
from volcano_global.db.base import utcnow
from volcano_global.db.engine import create_engine, create_session_factory, transaction
from volcano_global.db.models import PriorityClassRow, Queue
from volcano_global.jobspec.tenancy import NAMESPACES

YAML = {"Content-Type": "application/yaml"}


async def test_a_change_through_another_replica_applies_to_the_next_submission(
    app: FastAPI, api: httpx.AsyncClient, database_url: str
) -> None:
    body = yaml.safe_dump(queue("team", **{NAMESPACES: "ml"}))
    assert (await api.post("/api/v1/apply", content=body, headers=YAML)).status_code == 200
    later = yaml.safe_dump(queue("later"))  # the newest row: "team" is not the newest stamp
    assert (await api.post("/api/v1/apply", content=later, headers=YAML)).status_code == 200
    assert (await submit(api, job_document("a", queue="team"))).status_code == 201
    other = create_engine(database_url)  # another replica's connection to the database
    try:
        async with transaction(create_session_factory(other)) as session:
            await session.execute(
                update(Queue)
                .where(Queue.name == "team")
                # stamped in the past, as a replica whose clock is behind stamps it
                .values(annotations={NAMESPACES: "x"}, updated_at=datetime(2020, 1, 1, tzinfo=UTC))
            )
    finally:
        await other.dispose()
    refused = await submit(api, job_document("b", queue="team"))
    assert refused.status_code == 403, refused.text
    assert "may not run this job in a member cluster" in refused.json()["message"]


async def test_a_refusal_lifted_through_another_replica_applies_to_the_next_submission(
    app: FastAPI, api: httpx.AsyncClient, database_url: str
) -> None:
    body = yaml.safe_dump(queue("team", **{NAMESPACES: "x"}))
    assert (await api.post("/api/v1/apply", content=body, headers=YAML)).status_code == 200
    assert (await submit(api, job_document("a", queue="team"))).status_code == 403
    unknown = await submit(api, job_document("b", priorityClassName="urgent"))
    assert unknown.status_code == 422, unknown.text

    async def change(session: AsyncSession) -> None:
        await session.execute(
            update(Queue).where(Queue.name == "team").values(annotations={NAMESPACES: "ml"})
        )
        session.add(PriorityClassRow(name="urgent", value=5000, preemption_policy="Never"))

    await through_another_replica(database_url, change)
    accepted = await submit(api, job_document("a", queue="team"))
    assert accepted.status_code == 201, accepted.text
    urgent = await submit(api, job_document("b", priorityClassName="urgent"))
    assert urgent.status_code == 201, urgent.text
    assert (urgent.json()["priority"], urgent.json()["preemptionPolicy"]) == (5000, "Never")


async def test_a_default_class_set_through_another_replica_applies_to_the_next_job(
    app: FastAPI, api: httpx.AsyncClient, database_url: str
) -> None:
    first = await submit(api, job_document("a"))
    assert first.status_code == 201 and first.json()["priority"] == 0, first.text

    async def change(session: AsyncSession) -> None:
        await session.execute(update(PriorityClassRow).values(global_default=False))
        session.add(PriorityClassRow(name="house", value=700, global_default=True))

    await through_another_replica(database_url, change)
    # Checked against the rules read before the change (nothing refuses it), the job is
    # written only once checked against the rules now: with the new default's value.
    second = await submit(api, job_document("b"))
    assert second.status_code == 201, second.text
    assert second.json()["priority"] == 700


async def through_another_replica(database_url: str, change: Any) -> None:
    """`change(session)` committed through another engine, as another replica would."""
    other = create_engine(database_url)
    try:
        async with transaction(create_session_factory(other)) as session:
            await change(session)
    finally:
        await other.dispose()


async def test_unchanged_rules_are_not_read_again(app: FastAPI, api: httpx.AsyncClient) -> None:
    assert (await submit(api, job_document("warm"))).status_code == 201
    with statements_seen(app) as statements:
        for n in range(3):
            assert (await submit(api, job_document(f"j{n}"))).status_code == 201
    assert not [s for s in statements if "FROM priority_classes" in s and "annotations" in s]
    assert not [s for s in statements if s.startswith("SELECT queues.name, queues.annotations")]
    # No statement of the submission's own: the writer's batch compares the fingerprint.
    assert not [s for s in statements if s.startswith(("SELECT concat_ws", "SELECT (SELECT"))]
    if app.state.engine.dialect.name == "postgresql":  # its one statement
        # (on a slow machine the pending limits' periodic count may run between them)
        assert len([s for s in statements if s.startswith("WITH incoming")]) == 3
    else:  # its read (queues, finished holders, fingerprint), then the inserts
        reads = [s for s in statements if s.startswith("SELECT 'queue'")]
        assert len(reads) == 3 and all("'rules'" in s for s in reads)


@pytest.mark.parametrize("changes", [RULE_CHANGES - 1, RULE_CHANGES])
async def test_rules_that_keep_changing_during_a_submission_give_503(
    app: FastAPI,
    api: httpx.AsyncClient,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    changes: int,
) -> None:
    """Another replica changes the queues just before each write of the submission: every
    write finds the rules it was checked against moved, and it is checked again; after
    RULE_CHANGES of them it is answered 503 (retry), nothing stored. One fewer: it is stored."""
    assert (await submit(api, job_document("warm"))).status_code == 201  # the rules read
    writer = app.state.job_writer
    write = writer.enqueue
    writes = 0

    def changed_first(*args: Any, **kwargs: Any) -> asyncio.Future[Any]:
        return asyncio.ensure_future(change_then_write(*args, **kwargs))

    async def change_then_write(*args: Any, **kwargs: Any) -> Any:
        nonlocal writes
        writes += 1
        if writes <= changes:

            async def change(session: AsyncSession) -> None:
                await session.execute(
                    update(Queue)
                    .where(Queue.name == "default")
                    .values(annotations={"change": str(writes)}, updated_at=utcnow())
                )

            await through_another_replica(database_url, change)
        return await write(*args, **kwargs)

    monkeypatch.setattr(writer, "enqueue", changed_first)
    answer = await submit(api, job_document("moving"))
    assert writes == min(changes + 1, RULE_CHANGES)
    if changes < RULE_CHANGES:
        assert answer.status_code == 201, answer.text
        return
    assert answer.status_code == 503, answer.text
    assert answer.json()["message"] == (
        "queues or priority classes changed throughout the submission: retry it"
    )
    names = (await api.get("/api/v1/jobs")).json()["items"]
    assert [job["name"] for job in names] == ["warm"]
