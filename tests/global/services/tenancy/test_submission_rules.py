"""The rules a submission is checked against (priority classes, the queues' tenancy) are read
again only when queues or classes changed, and a change made through another replica's
connection applies to the next submission (issue 35: three reads per submission)."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import yaml
from fastapi import FastAPI
from sqlalchemy import event, update

from tests.factories import job_document, submit
from tests.factories import queue_document as queue
from volcano_global.db.engine import create_engine, create_session_factory, transaction
from volcano_global.db.models import Queue
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


async def test_unchanged_rules_are_not_read_again(app: FastAPI, api: httpx.AsyncClient) -> None:
    assert (await submit(api, job_document("warm"))).status_code == 201
    statements: list[str] = []

    def seen(*args: object) -> None:
        statements.append(" ".join(str(args[2]).split()))

    event.listen(app.state.engine.sync_engine, "before_cursor_execute", seen)
    try:
        for n in range(3):
            assert (await submit(api, job_document(f"j{n}"))).status_code == 201
    finally:
        event.remove(app.state.engine.sync_engine, "before_cursor_execute", seen)
    assert not [s for s in statements if "FROM priority_classes" in s and "annotations" in s]
    assert not [s for s in statements if s.startswith("SELECT queues.name, queues.annotations")]
    assert len([s for s in statements if s.startswith("SELECT (SELECT count(*) FROM queues)")]) == 3
