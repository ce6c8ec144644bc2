"""Shares in a cluster of several GPU models, per model (SQLite and Postgres): an assignment
names the model of a share written before shares had one, a job naming no model holds the
leaf of the model it was packed on, and the books bound each model's free GPUs by that
model's shares."""

from __future__ import annotations

import importlib
import uuid

import httpx
from fastapi import FastAPI
from sqlalchemy import delete, select, update
from sqlalchemy.orm import selectinload

from tests.factories import submit
from volcano_global.db.engine import transaction
from volcano_global.db.models import ClusterShare, Job, OutboxMessage, Placement
from volcano_global.services.lifecycle.outbox import enqueue_assignments

# `global` is a keyword: the neighbour module is imported by name.
_rounds = importlib.import_module("tests.global.scheduler.test_heterogeneous_rounds")
assignments, pinned, runs, two_models_east = (
    _rounds.assignments,
    _rounds.pinned,
    _rounds.runs,
    _rounds.two_models_east,
)


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
