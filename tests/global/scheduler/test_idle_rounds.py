"""The scheduling loop idles when nothing can change: a narrow elastic job with no room to
grow does not cost a round every period, until an inventory moves (a job ending frees GPUs),
a placement ends or a queue changes, or, for a job waiting out its resize interval, until the
interval ends. Between rounds the loop waits for its period or a wake-up: a submission, and
every commit that may let a job run (a cancel, GPUs freed, a queue's quota raised)."""

from __future__ import annotations

import asyncio
import copy
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from datetime import timedelta

import httpx
from fastapi import FastAPI
from sqlalchemy import update

from tests.factories import (
    create_cluster,
    create_queue,
    elastic_document,
    eventually,
    inventory,
    job_document,
    submit,
)
from volcano_global.background import run_guarded, scheduling_rounds
from volcano_global.clock import ManualClock
from volcano_global.db.base import utcnow
from volcano_global.db.engine import transaction
from volcano_global.db.models import Job, JobState
from volcano_global.scheduler.loop import Scheduler
from volcano_global.services.jobs.submission import NOT_YET_SCHEDULED
from volcano_global.services.scheduling.round_input import narrow_elastic


async def put_nodes(api: httpx.AsyncClient, nodes: int, *, used: int) -> None:
    """gpu-east's inventory: `nodes` 8-GPU nodes under one ToR, the first `used` of them full."""
    body = inventory("gpu-east", tors=1, nodes_per_tor=nodes)
    for node in body["nodes"][:used]:
        node["gpuUsed"] = 8
    assert (await api.put("/api/v1/clusters/gpu-east/inventory", json=body)).status_code == 200


async def narrow_job(app: FastAPI, api: httpx.AsyncClient, *, placed_ago: timedelta) -> str:
    """An elastic job of 8 pods placed on the 4 nodes of gpu-east, running since `placed_ago`."""
    doc = elastic_document("elastic", replicas=8, minAvailable=2)
    uid = str((await submit(api, doc)).json()["uid"])
    assert (await app.state.scheduler.run_once()).result.placed == [uid]  # 4 of its 8 pods
    async with transaction(app.state.sessions) as session:
        await session.execute(
            update(Job)
            .where(Job.id == uuid.UUID(uid))
            .values(state=JobState.RUNNING, placed_at=utcnow() - placed_ago)
        )
    return uid


async def test_a_narrow_elastic_job_without_room_idles_the_loop_until_the_inventory_moves(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    scheduler = app.state.scheduler
    await create_cluster(api, "gpu-east")
    await put_nodes(api, 4, used=0)
    uid = await narrow_job(app, api, placed_ago=timedelta(hours=1))
    # Its pods run: the agent's inventory shows the four nodes used.
    await put_nodes(api, 4, used=4)
    # The first look finds no room to grow; after it, nothing to do until something moves.
    first = await scheduler.run_once()
    assert first is None or not first.result.resized
    assert await scheduler.run_once() is None
    assert await scheduler.run_once() is None
    # Four more nodes: the inventory moved, and the job grows into them.
    await put_nodes(api, 8, used=4)
    report = await scheduler.run_once()
    assert report is not None and report.result.resized == [uid]


async def test_a_job_waiting_out_its_resize_interval_idles_the_loop_until_it_ends(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    scheduler = app.state.scheduler
    await create_cluster(api, "gpu-east")
    await put_nodes(api, 4, used=0)
    # Placed 594 s ago: 6 s left of the 600 s interval; from here time moves by hand.
    uid = await narrow_job(app, api, placed_ago=timedelta(seconds=594))
    scheduler.clock = clock = ManualClock(utcnow())
    await put_nodes(api, 8, used=4)
    # Room to grow, but not yet: the first look grows nothing, then the loop idles.
    first = await scheduler.run_once()
    assert first is None or not first.result.resized
    assert await scheduler.run_once() is None
    clock.advance(5.0)
    assert await scheduler.run_once() is None  # 1 s left: still idle
    # The interval ends with nothing else moving: the next round grows it.
    clock.advance(1.2)
    report = await scheduler.run_once()
    assert report is not None and report.result.resized == [uid]


async def test_a_cancel_frees_room_for_an_idle_narrow_job_without_an_inventory_moving(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    scheduler = app.state.scheduler
    await create_cluster(api, "gpu-east")
    await put_nodes(api, 8, used=0)
    rigid = str((await submit(api, job_document("rigid", replicas=4))).json()["uid"])
    assert (await scheduler.run_once()).result.placed == [rigid]  # holds 4 nodes, not running
    uid = await narrow_job(app, api, placed_ago=timedelta(hours=1))
    await put_nodes(api, 8, used=4)  # the elastic job's pods run; the rigid job's do not yet
    first = await scheduler.run_once()
    assert first is None or not first.result.resized
    assert await scheduler.run_once() is None
    # Cancelled before its pods ran: its hold ends and no inventory moves.
    assert (await api.post(f"/api/v1/jobs/{rigid}/cancel")).status_code == 200
    report = await scheduler.run_once()
    assert report is not None and report.result.resized == [uid]


@asynccontextmanager
async def looping(scheduler: Scheduler) -> AsyncIterator[None]:
    """The scheduling loop running as the server runs it, with a period of a minute: within a
    test only a wake-up ends its wait."""
    scheduler.settings = scheduler.settings.model_copy(deep=True)
    scheduler.settings.scheduling.interval_s = 60.0
    scheduler.wake.clear()  # the submissions' wake-up: its round is the loop's first
    task = asyncio.create_task(run_guarded(scheduling_rounds(scheduler)))
    try:
        yield
    finally:
        task.cancel()
        with suppress(asyncio.CancelledError):
            await task


async def waits(api: httpx.AsyncClient, uid: str) -> bool:
    """Whether a round found no room for the job (it says why it waits)."""
    job = (await api.get(f"/api/v1/jobs/{uid}")).json()
    return job["state"] == "Pending" and job["pendingReason"] != NOT_YET_SCHEDULED


async def placed(api: httpx.AsyncClient, uid: str) -> bool:
    return (await api.get(f"/api/v1/jobs/{uid}")).json()["state"] == "Placed"


async def test_cancelling_a_running_job_wakes_the_loop_for_the_job_it_blocked(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    scheduler = app.state.scheduler
    await create_cluster(api, "gpu-east")
    await put_nodes(api, 1, used=0)
    blocker = str((await submit(api, job_document("blocker", replicas=1))).json()["uid"])
    assert (await scheduler.run_once()).result.placed == [blocker]
    async with transaction(app.state.sessions) as session:
        await session.execute(
            update(Job).where(Job.id == uuid.UUID(blocker)).values(state=JobState.RUNNING)
        )
    await put_nodes(api, 1, used=1)
    waiting = str((await submit(api, job_document("waiting", replicas=1))).json()["uid"])
    async with looping(scheduler):
        await eventually(lambda: waits(api, waiting))
        assert (await api.post(f"/api/v1/jobs/{blocker}/cancel")).status_code == 200
        await put_nodes(api, 1, used=0)  # the agent reports its pods gone
        await eventually(lambda: placed(api, waiting), within=30)  # before the period


async def test_raising_a_queue_s_quota_wakes_the_loop_for_the_job_it_capped(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    scheduler = app.state.scheduler
    await create_cluster(api, "gpu-east")
    await put_nodes(api, 2, used=0)
    await create_queue(api, "llm", gpuQuota=8)
    first = str((await submit(api, job_document("first", queue="llm", replicas=1))).json()["uid"])
    assert (await scheduler.run_once()).result.placed == [first]
    second = job_document("second", queue="llm", replicas=1)
    waiting = str((await submit(api, second)).json()["uid"])
    async with looping(scheduler):
        await eventually(lambda: waits(api, waiting))  # a node is free; the quota is not
        raised = await api.patch("/api/v1/queues/llm", json={"gpuQuota": 16})
        assert raised.status_code == 200, raised.text
        await eventually(lambda: placed(api, waiting), within=30)  # before the period


async def test_an_elastic_job_with_a_master_at_full_width_is_not_narrow(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    # Its placement holds its 4 GPU pods, not its master (docs/placement.md, "Tasks without
    # GPUs"): it was taken for narrow (4 of 5 pods), and each inventory move cost a round.
    await create_cluster(api, "gpu-east")
    await put_nodes(api, 4, used=0)
    doc = elastic_document("mpi", replicas=4, minAvailable=3)
    master = copy.deepcopy(doc["spec"]["tasks"][0]) | {"name": "master", "replicas": 1}
    master["template"]["spec"]["containers"][0].pop("resources", None)
    doc["spec"]["tasks"].insert(0, master)
    uid = str((await submit(api, doc)).json()["uid"])
    assert (await app.state.scheduler.run_once()).result.placed == [uid]  # its 4 GPU pods
    async with transaction(app.state.sessions) as session:
        await session.execute(
            update(Job).where(Job.id == uuid.UUID(uid)).values(state=JobState.RUNNING)
        )
        assert not await narrow_elastic(session)
