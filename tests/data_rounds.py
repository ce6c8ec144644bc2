"""Data gravity rounds for the tests: DataSources, claims and reading jobs through the API,
what a placement stores, and an agent stream that reports on shares."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import yaml
from fastapi import FastAPI
from sqlalchemy import select

from tests.data_documents import data_source, data_source_claim
from tests.factories import REPLY_S, inventory, job_document, submit
from tests.grpc_stream import Stream, snapshot
from volcano_global.db.engine import transaction
from volcano_global.db.models import ClusterShare, LinkReservation
from volcano_global.rpc.v1 import agent_pb2 as pb

URI = "s3://corpora/v3/*"


async def apply(api: httpx.AsyncClient, *documents: dict[str, Any]) -> None:
    response = await api.post(
        "/api/v1/apply",
        content=yaml.safe_dump_all(documents),
        headers={"Content-Type": "application/yaml"},
    )
    assert response.status_code == 200, response.text


async def corpus(api: httpx.AsyncClient, *, size: str = "2Ti", where: str = "gpu-b") -> None:
    """corpus-v3 in `where`, with where its bytes are."""
    document = data_source(clusters=(where,), size=size)
    document["spec"]["attributes"]["uri"] = URI
    await apply(api, document)


async def put_inventory(api: httpx.AsyncClient, name: str, *, used: int = 0) -> None:
    response = await api.put(f"/api/v1/clusters/{name}/inventory", json=inventory(name, used=used))
    assert response.status_code == 200, response.text


async def reader(
    api: httpx.AsyncClient, name: str = "train", *, estimate: str = "1h", claim: bool = True
) -> str:
    """A 64-GPU job of namespace ml, with a claim on corpus-v3 (unless not `claim`)."""
    if claim:
        await apply(api, data_source_claim(f"{name}-corpus", workload=name))
    document = job_document(name, replicas=8, runningEstimate=estimate)
    response = await submit(api, document)
    assert response.status_code == 201, response.text
    return str(response.json()["uid"])


async def job(api: httpx.AsyncClient, uid: str) -> dict[str, Any]:
    return dict((await api.get(f"/api/v1/jobs/{uid}")).json())


async def clusters_of(api: httpx.AsyncClient, uid: str) -> list[str]:
    return [s["cluster"] for s in (await job(api, uid))["placement"]["shares"]]


async def rows(
    app: FastAPI, api: httpx.AsyncClient, uid: str
) -> tuple[list[ClusterShare], list[LinkReservation]]:
    """The shares and link reservations of the job's placement, as stored."""
    placement = uuid.UUID((await job(api, uid))["placement"]["uid"])
    async with transaction(app.state.sessions) as session:
        shares = await session.execute(
            select(ClusterShare).where(ClusterShare.placement_id == placement)
        )
        held = await session.execute(
            select(LinkReservation).where(LinkReservation.placement_id == placement)
        )
        return list(shares.scalars()), list(held.unique().scalars())


class Reports:
    """An agent stream of a cluster (gpu-a unless said): its inventory of 64 GPUs, and its
    reports on a share."""

    def __init__(self, app: FastAPI, token: str, cluster: str = "gpu-a") -> None:
        self.stream = Stream(app, token)
        self.cluster = cluster
        self.seq = 0

    async def start(self) -> None:
        await self.stream.hello(self.cluster)
        assert (await self.stream.send(snapshot(1, nodes=8))).ack.seq == 1

    async def report(self, placement: str, phase: int, message: str = "") -> None:
        self.seq += 1
        status = pb.JobStatusReport(
            placement_id=placement, phase=phase, message=message, report_seq=self.seq
        )
        await self.stream.call.write(pb.AgentMessage(job_status=status))
        while True:  # stored once acknowledged
            reply = await asyncio.wait_for(self.stream.call.read(), timeout=REPLY_S)
            if reply.WhichOneof("body") == "report_ack" and reply.report_ack.report_seq >= self.seq:
                return
