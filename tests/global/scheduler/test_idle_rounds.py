"""The scheduling loop idles when nothing can change: a narrow elastic job with no room to
grow does not cost a round every period, until an inventory moves (a job ending frees GPUs)
or, for a job waiting out its resize interval, until the interval ends."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import httpx
from fastapi import FastAPI
from sqlalchemy import update

from tests.factories import create_cluster, elastic_document, inventory, submit
from volcano_global.db.base import utcnow
from volcano_global.db.engine import transaction
from volcano_global.db.models import Job, JobState


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
    # Placed 594 s ago: 6 s left of the 600 s interval (room for two slow rounds under load).
    uid = await narrow_job(app, api, placed_ago=timedelta(seconds=594))
    await put_nodes(api, 8, used=4)
    # Room to grow, but not yet: the first look grows nothing, then the loop idles.
    first = await scheduler.run_once()
    assert first is None or not first.result.resized
    assert await scheduler.run_once() is None
    # The interval ends with nothing else moving: the next round grows it.
    await asyncio.sleep(6.2)
    report = await scheduler.run_once()
    assert report is not None and report.result.resized == [uid]
