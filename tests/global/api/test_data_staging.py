"""Data as people see it through the REST API (issue 33, item 6): the staging in progress
(`GET /api/v1/staging`) and one job's data (`GET /api/v1/jobs/{uid}/data`), with a share that
is really staging: placed by a round, given a copy (as the round that chooses to stage writes
it) and reported Staging with its progress by an agent over a real stream."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import yaml
from fastapi import FastAPI
from sqlalchemy import update

from tests.data_documents import data_source, data_source_claim
from tests.factories import REPLY_S, create_cluster, job_document, submit
from tests.grpc_stream import Stream, snapshot
from volcano_global.db.engine import transaction
from volcano_global.db.models import ClusterShare, Placement, PlacementState
from volcano_global.jobspec.extensions import COMMUNICATION
from volcano_global.rpc.shares import StagingItem
from volcano_global.rpc.v1 import agent_pb2 as pb

TIB = 2**40
CORPUS = StagingItem(
    data_source="corpus-v3",
    bytes=40 * TIB,
    source_cluster="gpu-west",
    source_uri="s3://corpora/v3/",
    destination="/data/corpus-v3",
    gbps=100.0,
)


async def apply(api: httpx.AsyncClient, *documents: Any) -> None:
    response = await api.post(
        "/api/v1/apply",
        content=yaml.safe_dump_all(documents),
        headers={"Content-Type": "application/yaml"},
    )
    assert response.status_code == 200, response.text


class Staged:
    """Job ml/train placed on gpu-east by a round, its share given the corpus to copy from
    gpu-west, and gpu-east's agent stream to report on it."""

    def __init__(self, app: FastAPI, api: httpx.AsyncClient) -> None:
        self.app, self.api, self.seq = app, api, 0

    async def start(self) -> None:
        token = str((await create_cluster(self.api, "gpu-east"))["agentToken"])
        self.stream = Stream(self.app, token)
        await self.stream.hello()
        assert (await self.stream.send(snapshot(1, nodes=8))).ack.seq == 1
        self.uid = (await submit(self.api, job_document("train", replicas=1))).json()["uid"]
        assert await self.app.state.scheduler.run_once() is not None
        # Claimed once placed: gpu-west is no member, so a round would not place it on gpu-east
        # (tests/global/scheduler/test_data_rounds.py has the round's own staging).
        await apply(self.api, data_source(clusters=("gpu-west",)), data_source_claim())
        job = (await self.api.get(f"/api/v1/jobs/{self.uid}")).json()
        self.placement = job["placement"]["uid"]
        async with transaction(self.app.state.sessions) as session:
            await session.execute(update(ClusterShare).values(staging=[CORPUS.to_payload()]))

    async def report(self, phase: int, **progress: int) -> None:
        self.seq += 1
        status = pb.JobStatusReport(placement_id=self.placement, phase=phase, report_seq=self.seq)
        for name, value in progress.items():
            setattr(status, name, value)
        await self.stream.call.write(pb.AgentMessage(job_status=status))
        while True:  # stored once acknowledged
            reply = await asyncio.wait_for(self.stream.call.read(), timeout=REPLY_S)
            if reply.WhichOneof("body") == "report_ack" and reply.report_ack.report_seq >= self.seq:
                return


@pytest.fixture
async def staged(app: FastAPI, api: httpx.AsyncClient) -> AsyncIterator[Staged]:
    staged = Staged(app, api)
    await staged.start()
    yield staged
    await staged.stream.close()


async def test_staging_in_progress_and_the_jobs_data(staged: Staged) -> None:
    api = staged.api
    assert (await api.get("/api/v1/staging")).json()["items"] == []  # assigned, not reported
    await staged.report(pb.SHARE_PHASE_STAGING, staged_bytes=10 * TIB, staging_bytes=40 * TIB)

    (item,) = (await api.get("/api/v1/staging")).json()["items"]
    assert (item["jobUid"], item["namespace"], item["name"], item["queue"]) == (
        staged.uid,
        "ml",
        "train",
        "default",
    )
    assert (item["cluster"], item["phase"], item["message"]) == (
        "gpu-east",
        "Staging",
        "staged 10 TiB of 40 TiB (25%)",
    )
    assert item["items"] == [
        {
            "dataSource": "corpus-v3",
            "bytes": 40 * TIB,
            "sourceCluster": "gpu-west",
            "destination": "/data/corpus-v3",
            "gbps": 100.0,
        }
    ]
    assert item["reportedAt"] is not None
    assert item["stagedAt"] is None

    data = (await api.get(f"/api/v1/jobs/{staged.uid}/data")).json()
    assert data["datasets"] == [
        {
            "name": "corpus-v3",
            "sizeBytes": 40 * TIB,
            "clusters": ["gpu-west"],
            "readGbps": None,
            "source": "claim",
            "claim": "ml/train-corpus",
            "bound": True,
        }
    ]
    assert data["checkpoint"] is None
    (share,) = data["staging"]
    assert {k: v for k, v in share.items() if k in item} == {
        k: v for k, v in item.items() if k in share
    }

    # The copy ends: nothing in progress; the job's share shows when; the data is there too.
    await staged.report(pb.SHARE_PHASE_ACCEPTED)
    assert (await api.get("/api/v1/staging")).json()["items"] == []
    data = (await api.get(f"/api/v1/jobs/{staged.uid}/data")).json()
    (share,) = data["staging"]
    assert (share["phase"], share["stagedAt"] is not None) == ("Accepted", True)
    assert data["datasets"][0]["clusters"] == ["gpu-west", "gpu-east"]


async def test_a_queue_user_sees_the_staging_of_its_queues_only(staged: Staged) -> None:
    api = staged.api
    await staged.report(pb.SHARE_PHASE_STAGING, staged_bytes=1, staging_bytes=40 * TIB)
    assert (await api.post("/api/v1/queues", json={"name": "llm", "weight": 1})).status_code == 201
    issued = await api.post(
        "/api/v1/tokens", json={"name": "team llm", "role": "queue-user", "queues": ["llm"]}
    )
    other = {"Authorization": f"Bearer {issued.json()['token']}"}
    assert (await api.get("/api/v1/staging", headers=other)).json()["items"] == []
    refused = await api.get(f"/api/v1/jobs/{staged.uid}/data", headers=other)
    assert refused.status_code == 403
    assert len((await api.get("/api/v1/staging")).json()["items"]) == 1


async def test_a_withdrawn_placements_share_is_not_staging_any_more(staged: Staged) -> None:
    """Its last report said Staging, but the placement was taken back (the agent deletes the
    staging Job): nothing is copied; the job's page still shows where its last copy stood."""
    await staged.report(pb.SHARE_PHASE_STAGING, staged_bytes=1, staging_bytes=40 * TIB)
    async with transaction(staged.app.state.sessions) as session:
        await session.execute(update(Placement).values(state=PlacementState.WITHDRAWN))
    assert (await staged.api.get("/api/v1/staging")).json()["items"] == []
    data = (await staged.api.get(f"/api/v1/jobs/{staged.uid}/data")).json()
    assert [s["phase"] for s in data["staging"]] == ["Staging"]


async def test_a_waiting_jobs_declared_data_and_checkpoint(api: httpx.AsyncClient) -> None:
    document = job_document("declared")
    document["metadata"]["annotations"] = {
        COMMUNICATION: "{datasets: [{name: corpus-v3, size: 1Ti, readGbps: 40}, "
        "{name: scratch, size: 500Gi}], checkpoint: {size: 2Ti}}"
    }
    uid = (await submit(api, document)).json()["uid"]
    await apply(api, data_source(clusters=("gpu-west", "gpu-central")))
    data = (await api.get(f"/api/v1/jobs/{uid}/data")).json()
    assert [(d["name"], d["sizeBytes"], d["clusters"], d["bound"]) for d in data["datasets"]] == [
        ("corpus-v3", 40 * TIB, ["gpu-west", "gpu-central"], True),
        ("scratch", 500 * 2**30, [], False),
    ]
    assert data["checkpoint"] == {"sizeBytes": 2 * TIB, "cluster": None}
    assert data["staging"] == []  # never placed
    missing = await api.get("/api/v1/jobs/00000000-0000-0000-0000-000000000000/data")
    assert missing.status_code == 404
