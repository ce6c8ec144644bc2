"""Shares in a cluster of several GPU models, per model (SQLite and Postgres): an assignment
names the model of a share written before shares had one, a job naming no model holds the
leaf of the model it was packed on (and the API shows it), and the books bound each model's
free GPUs by that model's shares."""

from __future__ import annotations

import importlib
import uuid
from typing import Any

import httpx
from fastapi import FastAPI
from sqlalchemy import delete, select, update
from sqlalchemy.orm import selectinload

from tests.factories import create_cluster, create_queue, job_document, submit
from volcano_global.db.engine import transaction
from volcano_global.db.models import ClusterShare, Job, OutboxMessage, Placement
from volcano_global.services.lifecycle.outbox import enqueue_assignments

# `global` is a keyword: the neighbour module is imported by name.
_rounds = importlib.import_module("tests.global.scheduler.test_heterogeneous_rounds")
assignments, mixed_nodes, pinned = _rounds.assignments, _rounds.mixed_nodes, _rounds.pinned
runs, two_models_east = _rounds.runs, _rounds.two_models_east
HETEROGENEOUS = _rounds.HETEROGENEOUS


async def test_a_share_written_without_a_model_is_assigned_its_jobs(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    # A share written before shares had a model (NULL): its assignment names its job's.
    await two_models_east(api)
    uid = (await submit(api, pinned("first", "H100"))).json()["uid"]
    assert (r := await app.state.scheduler.run_once()) and r.result.placed == [uid]
    async with transaction(app.state.sessions) as session:
        await session.execute(update(ClusterShare).values(gpu_model=None))
        await session.execute(delete(OutboxMessage))
    async with transaction(app.state.sessions) as session:
        job = await session.get(Job, uuid.UUID(uid))
        placement = (
            await session.execute(
                select(Placement)
                .where(Placement.job_id == job.id)
                .options(selectinload(Placement.shares))
            )
        ).scalar_one()
        enqueue_assignments(session, job=job, placement=placement, shares=placement.shares)
    assert (await assignments(app, uid))["gpu-east"].gpu_model == "H100"
    assert await shown_models(api, uid) == ["H100"]


async def shown_models(api: httpx.AsyncClient, uid: str) -> list[str | None]:
    """The GPU model of each share of the job's placement, as the API shows them."""
    placement = (await api.get(f"/api/v1/jobs/{uid}")).json()["placement"]
    return [share["gpuModel"] for share in placement["shares"]]


async def test_a_job_naming_no_model_holds_the_model_it_was_packed_on(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    # A job that names no model is packed on gpu-east's H100s (the most free): its share
    # says so, and its hold takes the H100 leaf, not the A100 leaf of the same name.
    await create_cluster(api, "gpu-east")
    east = mixed_nodes("gpu-east", A100=8, H100=10)
    assert (await api.put("/api/v1/clusters/gpu-east/inventory", json=east)).status_code == 200
    await create_queue(api, "llm")
    anyone = (await submit(api, job_document("any", queue="llm", replicas=8))).json()["uid"]
    assert (r := await app.state.scheduler.run_once()) and r.result.placed == [anyone]
    async with transaction(app.state.sessions) as session:
        assert (await session.execute(select(ClusterShare.gpu_model))).scalars().all() == ["H100"]
    assert (await assignments(app, anyone))["gpu-east"].gpu_model == "H100"
    assert await shown_models(api, anyone) == ["H100"]

    h100 = (await submit(api, pinned("h100", "H100"))).json()["uid"]
    assert (r := await app.state.scheduler.run_once()) and r.result.placed == []
    a100 = (await submit(api, pinned("a100", "A100"))).json()["uid"]
    assert (r := await app.state.scheduler.run_once()) and r.result.placed == [a100]
    assert (await api.get(f"/api/v1/jobs/{h100}")).json()["state"] == "Pending"


async def _a100s_busy_unplaced(api: httpx.AsyncClient, east: dict[str, Any]) -> None:
    """gpu-east's A100s busy with pods the Global did not place, its H100s all free."""
    for node in east["nodes"]:
        node["gpuUsed"] = 8 if node["gpuModel"] == "A100" else 0
    assert (await api.put("/api/v1/clusters/gpu-east/inventory", json=east)).status_code == 200


async def test_the_books_bound_each_models_gpus_by_that_models_shares(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    # An H100 job runs on gpu-east, its pods not in the inventory (all H100s free), while the
    # A100s are busy with pods the Global did not place: bounded per cluster, the busy A100s
    # hid the running share and its H100s were booked twice.
    east = await two_models_east(api)
    first = (await submit(api, pinned("first", "H100"))).json()["uid"]
    assert (r := await app.state.scheduler.run_once()) and r.result.placed == [first]
    await runs(app, first)
    await _a100s_busy_unplaced(api, east)
    second = (await submit(api, pinned("second", "H100"))).json()["uid"]
    assert (r := await app.state.scheduler.run_once()) and r.result.placed == []
    assert (await api.get(f"/api/v1/jobs/{second}")).json()["state"] == "Pending"


async def test_a_running_child_holds_its_models_gpus_in_the_books(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    # The same for a heterogeneous HyperJob's H100 child: its share names H100, its job none.
    east = await two_models_east(api)
    uid = (await submit(api, HETEROGENEOUS)).json()["uid"]
    assert (r := await app.state.scheduler.run_once()) and r.result.placed == [uid]
    await runs(app, uid)
    await _a100s_busy_unplaced(api, east)
    await submit(api, pinned("h100", "H100"))
    assert (r := await app.state.scheduler.run_once()) and r.result.placed == []
