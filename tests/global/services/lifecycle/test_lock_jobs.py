"""Locking jobs for a writer that only moves them through their lifecycle (the status
reports') leaves out what the parser derived for placing them: each is a model validated as it
is read, and such a writer reads none of them."""

from __future__ import annotations

import uuid

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import inspect
from sqlalchemy.exc import InvalidRequestError

from tests.factories import job_document, submit
from volcano_global.db.models import JobState
from volcano_global.services.lifecycle.jobs import lifecycle_of, lock_jobs

DOCUMENT = {"source", "gang", "communication", "split_policy"}


async def test_jobs_locked_without_their_documents(app: FastAPI, api: httpx.AsyncClient) -> None:
    uid = uuid.UUID((await submit(api, job_document("lean"))).json()["uid"])
    async with app.state.sessions() as session:
        job = (await lock_jobs(session, [uid], documents=False))[uid]
        assert job.state is JobState.PENDING
        assert lifecycle_of(job).max_retry == job.max_retry  # the lifecycle is there
        assert DOCUMENT <= inspect(job).unloaded
        with pytest.raises(InvalidRequestError):
            job.gang  # noqa: B018 (raises instead of querying)
        await session.rollback()
    async with app.state.sessions() as session:
        job = (await lock_jobs(session, [uid]))[uid]
        assert not DOCUMENT & inspect(job).unloaded
        assert job.gang.total_pods == job.total_pods
