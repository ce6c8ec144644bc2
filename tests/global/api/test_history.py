"""GET /api/v1/history: what the scheduling loop sampled (allocation, waiting jobs, waits),
in buckets, with its retention bound and its parameters validated (SQLite and Postgres)."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import func, select

from tests.factories import create_cluster, inventory, job_document, submit
from volcano_global.clock import ManualClock
from volcano_global.db.base import utcnow
from volcano_global.db.engine import transaction
from volcano_global.db.models import RoundSample
from volcano_global.scheduler.loop import Scheduler
from volcano_global.services.scheduling.history import KEPT_FOR, SAMPLE_EVERY_S, take_sample


def sample(minutes_ago: float, *, allocated: int, waiting: int, oldest: float) -> RoundSample:
    return RoundSample(
        taken_at=utcnow() - timedelta(minutes=minutes_ago),
        gpus_total=64,
        gpus_allocated=allocated,
        waiting_jobs=waiting,
        waiting_gpus=8 * waiting,
        median_wait_seconds=oldest / 2,
        oldest_wait_seconds=oldest,
    )


async def test_a_sample_reads_the_fleet_and_the_api_returns_it(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    await create_cluster(api, "east")
    body = inventory("east", tors=2, nodes_per_tor=4, used=2)  # 64 GPUs, 16 in use
    assert (await api.put("/api/v1/clusters/east/inventory", json=body)).status_code == 200
    for name in ("a", "b"):
        assert (await submit(api, job_document(name, replicas=1))).status_code == 201
    async with transaction(app.state.sessions) as session:
        taken = await take_sample(session, now=utcnow() + timedelta(seconds=90))
    assert (taken.gpus_total, taken.gpus_allocated) == (64, 16)
    assert (taken.waiting_jobs, taken.waiting_gpus) == (2, 16)
    assert 89 < taken.median_wait_seconds <= taken.oldest_wait_seconds < 120

    since = (utcnow() - timedelta(hours=1)).isoformat()
    answer = (await api.get("/api/v1/history", params={"since": since, "step": 300})).json()
    (point,) = answer["items"]
    assert point["gpusAllocated"] == 16 and point["gpusTotal"] == 64
    assert point["waitingJobs"] == 2 and point["samples"] == 1
    assert answer["stepSeconds"] == 300


async def test_buckets_average_their_samples_and_keep_the_longest_wait(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    async with transaction(app.state.sessions) as session:
        session.add_all(
            [
                sample(48, allocated=10, waiting=4, oldest=100),
                sample(47, allocated=30, waiting=2, oldest=700),  # same 10-minute bucket
                sample(20, allocated=64, waiting=0, oldest=0),
                sample(600, allocated=1, waiting=1, oldest=1),  # before `since`
            ]
        )
    since = (utcnow() - timedelta(hours=1)).isoformat()
    items = (await api.get("/api/v1/history", params={"since": since, "step": 600})).json()["items"]
    assert [p["samples"] for p in items] == [2, 1]
    first, second = items
    assert first["gpusAllocated"] == 20 and first["waitingJobs"] == 3
    assert first["oldestWaitSeconds"] == 700 and first["medianWaitSeconds"] == 200
    assert second["gpusAllocated"] == 64


async def test_samples_older_than_the_retention_are_dropped(app: FastAPI) -> None:
    now = utcnow()
    async with transaction(app.state.sessions) as session:
        old = sample(0, allocated=1, waiting=0, oldest=0)
        old.taken_at = now - KEPT_FOR - timedelta(minutes=1)
        session.add(old)
    async with transaction(app.state.sessions) as session:
        await take_sample(session, now=now)
        count = await session.scalar(select(func.count()).select_from(RoundSample))
    assert count == 1


async def test_the_loop_samples_at_most_once_a_period(app: FastAPI) -> None:
    clock = ManualClock()
    scheduler = Scheduler(app.state.engine, app.state.sessions, app.state.settings, clock=clock)
    await scheduler.leadership.acquire()
    try:
        assert await scheduler.sample()
        clock.advance(SAMPLE_EVERY_S / 2)
        assert not await scheduler.sample()
        clock.advance(SAMPLE_EVERY_S / 2)
        assert await scheduler.sample()
    finally:
        await scheduler.stop()
    async with transaction(app.state.sessions) as session:
        assert await session.scalar(select(func.count()).select_from(RoundSample)) == 2


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"step": 5}, "step"),
        ({"step": "often"}, "step"),
        ({"since": "yesterday"}, "since"),
        ({"since": "2999-01-01T00:00:00Z"}, "since"),
        ({"since": "2020-01-01T00:00:00Z", "step": 60}, "step"),  # millions of buckets
    ],
)
async def test_bad_parameters_are_refused_naming_the_field(
    api: httpx.AsyncClient, params: dict[str, object], field: str
) -> None:
    response = await api.get("/api/v1/history", params=params)
    assert response.status_code == 422, response.text
    causes = response.json()["details"]["causes"]
    assert [c["field"] for c in causes] == [f"{field} (query)"]
