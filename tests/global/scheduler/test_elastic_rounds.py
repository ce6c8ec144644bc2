"""Elastic width in the server's rounds: an elastic job is placed at the width that fits, and
its queue holds that width against its quota (as the simulator counts it); it is resized only
after the resize interval and for a growth worth it, gives back replicas only as preemption
may take them, and its resize locks rows in the order the agents' reports do."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select, text, update

from tests.factories import (
    REPLY_S,
    create_cluster,
    create_queue,
    elastic_document,
    eventually,
    inventory,
    job_document,
    submit,
)
from volcano_global.db.base import utcnow
from volcano_global.db.engine import transaction
from volcano_global.db.models import Job, JobState, Placement
from volcano_global.services.lifecycle.jobs import lock_jobs


async def placed_pods(api: httpx.AsyncClient, uid: str) -> list[tuple[str, int]]:
    job = (await api.get(f"/api/v1/jobs/{uid}")).json()
    return [(s["cluster"], s["pods"]) for s in (job.get("placement") or {}).get("shares") or []]


async def test_a_narrow_elastic_job_holds_its_width_against_the_quota(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    for name in ("gpu-east", "gpu-west"):
        await create_cluster(api, name)
        body = inventory(name, tors=2, nodes_per_tor=4)  # 8 nodes of 8 GPUs
        assert (await api.put(f"/api/v1/clusters/{name}/inventory", json=body)).status_code == 200
    await create_queue(api, "q", gpuQuota=96)
    # 16 pods (128 GPUs), at least 4: one cluster holds 8 of them.
    elastic = (
        await submit(api, elastic_document("elastic", queue="q", replicas=16, minAvailable=4))
    ).json()["uid"]
    assert await app.state.scheduler.run_once() is not None
    (share,) = await placed_pods(api, elastic)
    assert share[1] == 8
    # The queue holds 64 of its 96 GPUs (not the document's 128): a 16-GPU job still fits.
    small = (await submit(api, job_document("small", queue="q", replicas=2))).json()["uid"]
    assert await app.state.scheduler.run_once() is not None
    assert [pods for _, pods in await placed_pods(api, small)] == [2]
    # And a job over what is left of the quota waits for it.
    big = (await submit(api, job_document("big", queue="q", replicas=3))).json()["uid"]
    await app.state.scheduler.run_once()
    job = (await api.get(f"/api/v1/jobs/{big}")).json()
    assert job["state"] == "Pending" and "quota" in job["pendingReason"], job["pendingReason"]


def cluster_inventory(cluster: str, nodes: int, busy: int) -> dict[str, Any]:
    """`nodes` 8-GPU nodes under one ToR, the first `busy` of them in use."""
    body = inventory(cluster, tors=1, nodes_per_tor=nodes)
    for node in body["nodes"][:busy]:
        node["gpuUsed"] = 8
    return body


async def put_inventory(api: httpx.AsyncClient, cluster: str, nodes: int, busy: int) -> None:
    body = cluster_inventory(cluster, nodes, busy)
    assert (await api.put(f"/api/v1/clusters/{cluster}/inventory", json=body)).status_code == 200


async def running_since(app: FastAPI, uid: str, minutes: float) -> None:
    """The job runs, placed (started or last resized) and started `minutes` ago."""
    at = utcnow() - timedelta(minutes=minutes)
    async with transaction(app.state.sessions) as session:
        await session.execute(
            update(Job)
            .where(Job.id == uuid.UUID(uid))
            .values(state=JobState.RUNNING, placed_at=at, started_at=at)
        )


async def resized(app: FastAPI) -> list[str]:
    """The jobs a round resized (a round with nothing to grow into is skipped: none)."""
    report = await app.state.scheduler.run_once()
    return [] if report is None else list(report.result.resized)


async def narrow_elastic_job(app: FastAPI, api: httpx.AsyncClient, *, pods: int, room: int) -> str:
    """An elastic job of `pods` pods (at least 2) placed on the `room` nodes of gpu-east, then
    running on them."""
    await create_cluster(api, "gpu-east")
    await put_inventory(api, "gpu-east", room, 0)
    doc = elastic_document("elastic", replicas=pods, minAvailable=2)
    uid = str((await submit(api, doc)).json()["uid"])
    assert await app.state.scheduler.run_once() is not None
    assert await placed_pods(api, uid) == [("gpu-east", room)]
    await put_inventory(api, "gpu-east", room, room)
    return uid


async def test_an_elastic_job_is_not_resized_within_the_interval_of_its_last_start(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    uid = await narrow_elastic_job(app, api, pods=16, room=8)
    await put_inventory(api, "gpu-east", 16, 8)  # 8 more nodes: room to grow
    await running_since(app, uid, minutes=9)
    assert await resized(app) == []
    assert await placed_pods(api, uid) == [("gpu-east", 8)]
    await running_since(app, uid, minutes=11)  # the default interval is 10 minutes
    # (The idle loop waits for an inventory to move, or for the minute left of the interval:
    # time jumped here, so the inventory is sent again.)
    await put_inventory(api, "gpu-east", 16, 8)
    assert await resized(app) == [uid]
    assert await placed_pods(api, uid) == [("gpu-east", 16)]


async def test_an_elastic_job_grows_only_by_a_quarter_of_its_width(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    uid = await narrow_elastic_job(app, api, pods=8, room=7)
    await put_inventory(api, "gpu-east", 8, 7)  # one more node: 1 of 7 replicas is 14%
    await running_since(app, uid, minutes=60)
    assert await resized(app) == []
    app.state.scheduler.settings.scheduling.elastic.min_growth = 0.1
    await put_inventory(api, "gpu-east", 8, 7)  # (wakes the idle loop)
    assert await resized(app) == [uid]
    assert await placed_pods(api, uid) == [("gpu-east", 8)]


async def test_a_shrink_obeys_the_preemption_rules(app: FastAPI, api: httpx.AsyncClient) -> None:
    uid = await narrow_elastic_job(app, api, pods=8, room=8)  # at full width
    vip = (
        await submit(api, job_document("vip", replicas=3, priorityClassName="high-priority"))
    ).json()["uid"]

    async def round_shrinks() -> bool:
        report = await app.state.scheduler.run_once()
        assert report is not None
        assert not report.result.evicted  # never a whole-gang eviction here
        return report.result.resized == [uid]

    async def set_job(key: str, **values: Any) -> None:
        async with transaction(app.state.sessions) as session:
            await session.execute(update(Job).where(Job.id == uuid.UUID(key)).values(**values))

    # Started 5 minutes ago: under the minimum run time (and the resize interval).
    await running_since(app, uid, minutes=5)
    assert not await round_shrinks()
    # Long enough, but annotated volcano.sh/preemptable: "false" (read at submission).
    await running_since(app, uid, minutes=60)
    await set_job(uid, preemptable=False)
    assert not await round_shrinks()
    await set_job(uid, preemptable=True)
    # The waiting job's class never preempts.
    await set_job(vip, preemption_policy="Never")
    assert not await round_shrinks()
    # Preemption switched off: no shrink either.
    await set_job(vip, preemption_policy="PreemptLowerPriority")
    app.state.scheduler.settings.scheduling.preemption.enabled = False
    assert not await round_shrinks()
    app.state.scheduler.settings.scheduling.preemption.enabled = True
    assert await round_shrinks()
    assert await placed_pods(api, uid) == [("gpu-east", 5)]
    assert await placed_pods(api, vip) == [("gpu-east", 3)]


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)  # row locks
async def test_a_resize_locks_the_placement_before_the_job_as_reports_do(
    app: FastAPI, api: httpx.AsyncClient, database_url: str
) -> None:
    """A report's transaction holds the elastic job's placement while the round's resize
    commits: the resize waits for it without holding the job's row, so the report then locks
    the job (as `apply_reports` does) and both finish. Taken job first, Postgres would find a
    deadlock here and abort one. (SQLite has one writer at a time: no row locks to order.)"""
    uid = await narrow_elastic_job(app, api, pods=16, room=8)
    await put_inventory(api, "gpu-east", 16, 8)
    await running_since(app, uid, minutes=60)
    async with transaction(app.state.sessions) as session:
        [placement_id] = (
            await session.execute(select(Placement.id).where(Placement.job_id == uuid.UUID(uid)))
        ).scalars()

    async def waiting_on_a_lock() -> bool:
        async with transaction(app.state.sessions) as session:
            waiting = await session.execute(
                text(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND wait_event_type = 'Lock'"
                )
            )
            return bool(waiting.scalar())

    async with app.state.sessions() as report, report.begin():
        await report.execute(
            select(Placement).where(Placement.id == placement_id).with_for_update(of=Placement)
        )
        round_task = asyncio.create_task(app.state.scheduler.run_once())
        await eventually(waiting_on_a_lock)
        assert not round_task.done()
        jobs = await asyncio.wait_for(lock_jobs(report, [uuid.UUID(uid)]), timeout=REPLY_S)
        assert list(jobs) == [uuid.UUID(uid)]
    result = await asyncio.wait_for(round_task, timeout=REPLY_S)
    assert result is not None and result.result.resized == [uid]
    assert await placed_pods(api, uid) == [("gpu-east", 16)]


async def test_a_just_grown_elastic_job_gives_back_replicas_rather_than_being_evicted(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    """The issue's case: an elastic 4 x 8-GPU job (at least 2) just grew to its full width;
    a high-priority 16-GPU job arrives with no minimum run time. Giving back two replicas
    suffices, so that comes first: no eviction (which would spend a retry and the job's place
    in its queue), the elastic job keeps 2 pods, the new job starts."""
    uid = await narrow_elastic_job(app, api, pods=4, room=4)  # at full width
    await running_since(app, uid, minutes=0.5)  # (re)started half a minute ago
    app.state.scheduler.settings.scheduling.preemption.min_run_s = 0.0
    vip = (
        await submit(api, job_document("vip", replicas=2, priorityClassName="high-priority"))
    ).json()["uid"]
    report = await app.state.scheduler.run_once()
    assert report is not None
    assert not report.result.evicted and not report.result.nominated
    assert report.result.resized == [uid]
    assert await placed_pods(api, uid) == [("gpu-east", 2)]
    assert await placed_pods(api, vip) == [("gpu-east", 2)]
