"""Two replicas apply the reports of one gang's two shares at once (Postgres: row locks; on
SQLite one writer at a time serialises them). The second waits for the placement's lock and
must then see the share the first one ended, or the gang would never end."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select, text

from tests.factories import create_cluster, eventually, job_document, split_annotations, submit
from tests.grpc_stream import Stream, snapshot
from volcano_global.db.engine import transaction
from volcano_global.db.models import Cluster
from volcano_global.rpc.shares import SharePhase
from volcano_global.services.dispatch.reports import ShareReport, apply_reports


@pytest.fixture
def database_url(postgres_url: str) -> str:
    """Postgres only: the race is between row locks, which SQLite does not have."""
    from tests.conftest import empty_postgres

    asyncio.run(empty_postgres(postgres_url))
    return postgres_url


async def _split_job_running(app: FastAPI, api: httpx.AsyncClient) -> tuple[dict, uuid.UUID, str]:
    """A 2-share gang running in east and west; returns the clusters' ids, placement, job."""
    ids = {}
    for name in ("east", "west"):
        stream = Stream(app, (await create_cluster(api, name))["agentToken"])
        await stream.hello(name)
        assert (await stream.send(snapshot(1, nodes=1))).ack.seq == 1
        await stream.close()
        async with transaction(app.state.sessions) as session:
            ids[name] = await session.scalar(select(Cluster.id).where(Cluster.name == name))
    link = {"clusterA": "east", "clusterB": "west", "capacityGbps": 100}
    assert (await api.post("/api/v1/links", json=link)).status_code == 201
    document = job_document("split", replicas=2)
    document["metadata"]["annotations"] = split_annotations(1)
    uid = (await submit(api, document)).json()["uid"]
    assert await app.state.scheduler.run_once() is not None
    placement = uuid.UUID((await api.get(f"/api/v1/jobs/{uid}")).json()["placement"]["uid"])
    for phase in (SharePhase.ACCEPTED, SharePhase.RUNNING):
        async with transaction(app.state.sessions) as session:
            reports = [ShareReport(ids[n], placement, phase) for n in ("east", "west")]
            await apply_reports(session, reports)
    assert (await api.get(f"/api/v1/jobs/{uid}")).json()["state"] == "Running"
    return ids, placement, uid


async def test_a_report_that_waited_for_the_lock_sees_the_share_ended_meanwhile(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    ids, placement, uid = await _split_job_running(app, api)

    async def replica_b() -> None:
        async with transaction(app.state.sessions) as session:
            await apply_reports(
                session, [ShareReport(ids["west"], placement, SharePhase.SUCCEEDED)]
            )

    async def b_waits_for_a_lock() -> bool:
        async with transaction(app.state.sessions) as session:
            waiting = await session.scalar(
                text(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                    "AND datname = current_database()"
                )
            )
        return bool(waiting)

    async with transaction(app.state.sessions) as session:  # replica A, committed after B waits
        await apply_reports(session, [ShareReport(ids["east"], placement, SharePhase.SUCCEEDED)])
        b = asyncio.create_task(replica_b())
        await eventually(b_waits_for_a_lock)
    await asyncio.wait_for(b, 20)
    job = (await api.get(f"/api/v1/jobs/{uid}")).json()
    assert [s["phase"] for s in job["placement"]["shares"]] == ["Succeeded", "Succeeded"]
    assert job["state"] == "Succeeded"
