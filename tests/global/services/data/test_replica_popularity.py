"""How often a dataset was read lately, as the round reads it for replicas
(`services/data/replicas.popularity`; SQLite and Postgres): each job that reads it locally
counts once, however it says so; a claim wins over the job's declaration of the same data, so
a job whose claim reads it remotely does not count; the window starts at `since`."""

from __future__ import annotations

from datetime import datetime, timedelta

import httpx
from fastapi import FastAPI
from sqlalchemy import select

from tests.data_documents import data_source_claim
from tests.data_rounds import apply, corpus
from tests.factories import job_document, submit
from volcano_global.db.engine import transaction
from volcano_global.db.models import Job
from volcano_global.jobspec.extensions import COMMUNICATION
from volcano_global.services.data.replicas import popularity


async def _job(
    api: httpx.AsyncClient, name: str, *, declared: str = "", claim: dict[str, str] | None = None
) -> None:
    if claim is not None:
        await apply(api, data_source_claim(f"{name}-corpus", workload=name, **claim))
    document = job_document(name, replicas=1)
    if declared:
        document["metadata"]["annotations"] = {COMMUNICATION: f"{{datasets: [{declared}]}}"}
    response = await submit(api, document)
    assert response.status_code == 201, response.text


async def _submitted(app: FastAPI, name: str) -> datetime:
    async with transaction(app.state.sessions) as session:
        at = await session.scalar(select(Job.submitted_at).where(Job.name == name))
    assert at is not None
    return at


async def test_each_local_reader_counts_once_and_a_remote_claim_not_at_all(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    await corpus(api, size="1Ti", where="gpu-a")
    local = "{name: corpus-v3, size: 1Ti}"
    await _job(api, "both", declared=local, claim={})  # a claim and a declaration
    await _job(api, "remote", declared=local, claim={"readGbps": "25"})  # the claim wins
    await _job(api, "declares", declared=f"{local}, {{name: scratch, size: 1Gi}}")
    await _job(api, "streams", declared="{name: corpus-v3, size: 1Ti, readGbps: 40}")
    await _job(api, "claims", claim={})
    first, middle = await _submitted(app, "both"), await _submitted(app, "declares")
    after = await _submitted(app, "claims") + timedelta(seconds=1)
    async with transaction(app.state.sessions) as session:
        read = await popularity(session, since=first)
        assert read["corpus-v3"].readers == 3  # both, declares, claims
        assert "scratch" not in read  # no DataSource: nothing to copy
        assert (read["corpus-v3"].size_bytes, read["corpus-v3"].holders) == (2**40, ("gpu-a",))
        later = await popularity(session, since=middle)
        assert later["corpus-v3"].readers == 2  # declares (at the window's start), claims
        assert await popularity(session, since=after) == {}
