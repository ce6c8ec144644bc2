"""Stored job JSON on each database: a submitted job's gang, split policy, communication plan
and lifecycle policies read back as the models the parser made, stored as the JSON every
release before stored."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from fastapi import FastAPI

from tests.factories import job_document, submit
from volcano_global.db.base import JSONType
from volcano_global.db.engine import transaction
from volcano_global.db.models import Job
from volcano_global.db.types import StoredModel
from volcano_global.jobspec import Gang, ParseOptions, SplitPolicy, normalize_job
from volcano_global.jobspec.extensions import COMMUNICATION

# The job columns as plain JSON: what is in the database, whatever the model's type reads.
RAW = sa.table(
    "jobs",
    sa.column("id", sa.Uuid()),
    *(
        sa.column(c, JSONType)
        for c in ("gang", "split_policy", "communication", "lifecycle_policies")
    ),
)
STORED_BEFORE = {  # a split policy as stored before its column was typed (camelCase keys)
    "mode": "auto",
    "unit": "pods",
    "unitPods": 8,
    "maxClusters": 2,
    "minSharePods": 0,
    "crossingGbps": None,
    "source": "annotations",
    "minUnits": 0,
}


def _planned(name: str) -> dict[str, Any]:
    document = job_document(
        name, replicas=4, policies=[{"event": "PodEvicted", "action": "RestartJob"}]
    )
    document["metadata"]["annotations"] = {COMMUNICATION: "{tensorParallel: 8}"}
    return document


async def test_a_submitted_job_reads_back_what_the_parser_made(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    documents = {"planned": _planned("planned"), "plain": job_document("plain")}
    ids = {}
    for name, document in documents.items():
        created = await submit(api, document)
        assert created.status_code == 201, created.text
        ids[name] = uuid.UUID(created.json()["uid"])
    async with transaction(app.state.sessions) as session:
        for name, document in documents.items():
            parsed = normalize_job(document, ParseOptions())
            job = await session.get(Job, ids[name])
            assert job is not None
            assert (job.gang, job.split_policy, job.communication, job.lifecycle_policies) == (
                parsed.gang,
                parsed.split_policy,
                parsed.communication,
                parsed.lifecycle.policies,
            )
            raw = (await session.execute(sa.select(RAW).where(RAW.c.id == ids[name]))).one()
            # Stored by alias, as every release stored it (and migrations 0016 and on read it).
            assert raw.gang == parsed.gang.model_dump(mode="json", by_alias=True)
            assert raw.split_policy == parsed.split_policy.model_dump(mode="json", by_alias=True)
            assert raw.communication == (
                parsed.communication.model_dump(mode="json", by_alias=True)
                if parsed.communication
                else None
            )
            assert raw.lifecycle_policies == [
                p.model_dump(mode="json") for p in parsed.lifecycle.policies
            ]
    detail = (await api.get(f"/api/v1/jobs/{ids['planned']}")).json()
    assert detail["communication"]["tensorParallel"] == 8
    assert detail["splitPolicy"]["unitPods"] == 1


async def test_a_row_stored_the_old_way_reads_back_and_saves_the_same_way(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    uid = uuid.UUID((await submit(api, job_document("old"))).json()["uid"])
    async with transaction(app.state.sessions) as session:
        await session.execute(
            RAW.update()
            .where(RAW.c.id == uid)
            .values(split_policy=STORED_BEFORE, communication=None)
        )
    async with transaction(app.state.sessions) as session:
        job = await session.get(Job, uid)
        assert job is not None
        assert job.split_policy == SplitPolicy(
            mode="auto", unit_pods=8, max_clusters=2, source="annotations"
        )
        assert job.communication is None
        job.split_policy = job.split_policy.model_copy(update={"max_clusters": 3})
    async with transaction(app.state.sessions) as session:
        raw = (await session.execute(sa.select(RAW).where(RAW.c.id == uid))).one()
    assert raw.split_policy == STORED_BEFORE | {"maxClusters": 3}


def test_a_column_takes_only_its_own_model() -> None:
    column = StoredModel(SplitPolicy)
    with pytest.raises(TypeError, match="expected a SplitPolicy, got Gang"):
        column.process_bind_param(Gang(tasks=[], min_available=0, total_pods=0, total_gpus=0), None)  # type: ignore[arg-type]
