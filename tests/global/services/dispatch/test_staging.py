"""A share's Staging as the Global handles it, over a real agent stream (SQLite and Postgres):
the job's events show the copy start and end, the gang's start timeout counts from the end of
staging (a share still copying is not late), a failed staging requeues the job with its reason,
and the cluster that received the data is told to the data-source store."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import httpx
import pytest
import yaml
from fastapi import FastAPI
from sqlalchemy import select, update

from tests.data_documents import data_source
from tests.factories import REPLY_S, create_cluster, job_document, submit
from tests.grpc_stream import Stream, snapshot
from volcano_global.db.base import utcnow
from volcano_global.db.engine import transaction
from volcano_global.db.models import ClusterShare, Job
from volcano_global.rpc.shares import StagingItem
from volcano_global.rpc.v1 import agent_pb2 as pb
from volcano_global.services.dispatch.supervision import supervise

DEFAULT_S = 60.0
CORPUS = StagingItem(
    data_source="corpus-v3",
    bytes=40 * 2**40,
    source_cluster="gpu-west",
    source_uri="s3://corpora/v3/",
    destination="/data/corpus-v3",
    gbps=100.0,
)


class Placed:
    """One job placed on gpu-east by a round, its share given a staging (as the round that
    chose to stage would), and the agent's stream to report on it."""

    def __init__(self, app: FastAPI, api: httpx.AsyncClient) -> None:
        self.app, self.api = app, api
        self.seq = 0

    async def start(self) -> None:
        token = str((await create_cluster(self.api, "gpu-east"))["agentToken"])
        self.stream = Stream(self.app, token)
        await self.stream.hello()
        assert (await self.stream.send(snapshot(1, nodes=8))).ack.seq == 1
        self.uid = (await submit(self.api, job_document("train", replicas=1))).json()["uid"]
        assert await self.app.state.scheduler.run_once() is not None
        self.placement = (await self.job())["placement"]["uid"]
        async with transaction(self.app.state.sessions) as session:
            await session.execute(update(ClusterShare).values(staging=[CORPUS.to_payload()]))

    async def report(self, phase: int, message: str = "", **progress: int) -> None:
        self.seq += 1
        status = pb.JobStatusReport(
            placement_id=self.placement, phase=phase, message=message, report_seq=self.seq
        )
        for name, value in progress.items():
            setattr(status, name, value)
        await self.stream.call.write(pb.AgentMessage(job_status=status))
        while True:  # stored once acknowledged
            reply = await asyncio.wait_for(self.stream.call.read(), timeout=REPLY_S)
            if reply.WhichOneof("body") == "report_ack" and reply.report_ack.report_seq >= self.seq:
                return

    async def job(self) -> dict[str, Any]:
        return dict((await self.api.get(f"/api/v1/jobs/{self.uid}")).json())

    async def events(self) -> dict[str, str]:
        items = (await self.api.get(f"/api/v1/jobs/{self.uid}/events")).json()["items"]
        return {e["reason"]: e["message"] for e in items}

    async def sweep(self, after_s: float) -> list[str]:
        async with transaction(self.app.state.sessions) as session:
            outcomes = await supervise(
                session, default_timeout_s=DEFAULT_S, now=utcnow() + timedelta(seconds=after_s)
            )
        return [f"{o.job} {o.action}" for o in outcomes]


@pytest.fixture
async def placed(app: FastAPI, api: httpx.AsyncClient) -> Any:
    placed = Placed(app, api)
    await placed.start()
    yield placed
    await placed.stream.close()


async def test_a_staging_share_is_not_late_and_its_gang_clock_starts_when_it_ends(
    placed: Placed,
) -> None:
    await placed.report(pb.SHARE_PHASE_STAGING, staged_bytes=10 * 2**40, staging_bytes=40 * 2**40)
    job = await placed.job()
    assert job["state"] == "Placed"
    [share] = job["placement"]["shares"]
    assert (share["phase"], share["message"]) == ("Staging", "staged 10 TiB of 40 TiB (25%)")
    assert (await placed.events())["StagingStarted"] == (
        "gpu-east: staging corpus-v3 (40 TiB) from gpu-west at 100 Gbps (about 59 min)"
    )
    assert await placed.sweep(DEFAULT_S * 10) == []  # copying for 10 min: not late
    # The copy took two default timeouts: the clock starts at its end, not at the placement.
    async with transaction(placed.app.state.sessions) as session:
        await session.execute(update(Job).values(placed_at=utcnow() - timedelta(hours=1)))
    await placed.api.post(
        "/api/v1/apply",
        content=yaml.safe_dump(data_source(clusters=("gpu-west",))),
        headers={"Content-Type": "application/yaml"},
    )
    await placed.report(pb.SHARE_PHASE_ACCEPTED)
    # The DataSource now lists the cluster its staging reached.
    shown = (await placed.api.get("/api/v1/datasources/corpus-v3")).json()
    assert shown["clusters"] == ["gpu-west", "gpu-east"]
    assert (await placed.job())["state"] == "Dispatched"
    assert (await placed.events())["StagingEnded"].startswith("gpu-east: staged corpus-v3")
    async with transaction(placed.app.state.sessions) as session:
        staged_at = (await session.execute(select(ClusterShare.staged_at))).scalar_one()
    assert staged_at is not None
    assert await placed.sweep(DEFAULT_S / 2) == []
    assert await placed.sweep(DEFAULT_S + 5) == ["ml/train Withdrawn"]
    events = await placed.events()
    assert events["GangTimeout"].startswith(f"not every share started within {DEFAULT_S:g} s")


async def test_a_failed_staging_requeues_the_job_with_its_reason(placed: Placed) -> None:
    await placed.report(pb.SHARE_PHASE_STAGING)
    reason = "staging Job ml/train-stage failed: DeadlineExceeded"
    await placed.report(pb.SHARE_PHASE_FAILED, message=reason)
    job = await placed.job()
    assert job["state"] == "Pending"
    assert job["placement"]["state"] == "Withdrawn"
    assert reason in job["pendingReason"]
    events = await placed.events()
    assert events["StagingFailed"] == f"gpu-east: staging failed: {reason}"
    assert reason in events["GangWithdrawn"]
    assert "StagingEnded" not in events
