"""A queue whose first waiting jobs all back off after withdrawals (`withdrawals.py`) still
shows the round its later jobs: the back-off must not hide the rest of the line."""

from __future__ import annotations

import uuid

import httpx
from fastapi import FastAPI

from tests.factories import create_queue, job_document, submit
from volcano_global.db.base import utcnow
from volcano_global.db.engine import transaction
from volcano_global.db.models import Placement, PlacementState
from volcano_global.services.scheduling.round_input import _heads, _whole_queue
from volcano_global.solver import Policy


async def four_jobs_two_backing_off(app: FastAPI, api: httpx.AsyncClient) -> list[str]:
    await create_queue(api, "llm")
    uids = [
        (await submit(api, job_document(name, queue="llm"))).json()["uid"]
        for name in ("first", "second", "third", "fourth")
    ]
    now = utcnow()
    async with transaction(app.state.sessions) as session:
        for uid in uids[:2]:  # withdrawn twice just now: they wait 5 s
            for generation in (1, 2):
                session.add(
                    Placement(
                        job_id=uuid.UUID(uid),
                        generation=generation,
                        state=PlacementState.WITHDRAWN,
                        ended_at=now,
                    )
                )
    return uids


async def test_jobs_behind_backing_off_heads_are_read(app: FastAPI, api: httpx.AsyncClient) -> None:
    uids = await four_jobs_two_backing_off(app, api)
    async with transaction(app.state.sessions) as session:
        # Window 1 over two queues (default, llm): two heads per queue, both backing off.
        heads, names = await _heads(session, 1, Policy.FIRST_FIT, utcnow())
        ids = {str(row.id) for row in heads}
    assert ids == set(uids[2:]), "the jobs behind the backing-off heads are read"
    assert set(names.values()) == {"default", "llm"}


async def test_the_whole_queue_is_read_but_the_jobs_backing_off(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    uids = await four_jobs_two_backing_off(app, api)
    async with transaction(app.state.sessions) as session:
        rows, names = await _whole_queue(session, utcnow())
    assert {str(row.id) for row in rows} == set(uids[2:])
    assert {names[row.queue_id] for row in rows} == {"llm"}
    assert {(row.total_pods, row.total_gpus) for row in rows} == {(2, 16)}
