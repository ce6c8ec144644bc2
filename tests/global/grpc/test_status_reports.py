"""Agent status reports over a real gRPC stream (SQLite and Postgres; no scheduling loop: the
test runs the round that places the jobs)."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest
from fastapi import FastAPI

from tests.factories import create_cluster, job_document, submit
from tests.grpc_stream import Stream, snapshot
from volcano_global.rpc.v1 import agent_pb2 as pb


@pytest.fixture
async def east(api: httpx.AsyncClient) -> str:
    return str((await create_cluster(api, "gpu-east"))["agentToken"])


async def test_a_burst_of_status_reports_is_applied_in_order_whatever_the_batching(
    app: FastAPI, api: httpx.AsyncClient, east: str
) -> None:
    """Reports written without waiting for acks are applied together and in order: jobs go
    Dispatched then Running (one event each), a resent older report does not move a share
    back, a failed share withdraws its job, a report about an unknown placement is ignored;
    the last report number is acknowledged."""
    stream = Stream(app, east)
    await stream.hello()
    assert (await stream.send(snapshot(1, nodes=8))).ack.seq == 1
    uids = [(await submit(api, job_document(f"j{i}", replicas=1))).json()["uid"] for i in range(3)]
    report = await app.state.scheduler.run_once()
    assert report is not None and sorted(report.result.placed) == sorted(uids)
    placement = {
        uid: (await api.get(f"/api/v1/jobs/{uid}")).json()["placement"]["uid"] for uid in uids
    }
    a, b, c = (placement[uid] for uid in uids)
    burst = [
        (a, "Accepted"),
        (b, "Accepted"),
        (a, "Running"),
        (b, "Running"),
        (a, "Accepted"),  # resent after a newer one
        (c, "Failed"),
        (str(uuid.uuid4()), "Running"),  # a placement the Global does not know
    ]
    for seq, (placement_id, phase) in enumerate(burst, start=1):
        status = pb.JobStatusReport(placement_id=placement_id, phase=phase, report_seq=seq)
        await stream.call.write(pb.AgentMessage(job_status=status))
    acks = []
    while not acks or acks[-1] < len(burst):
        reply = await asyncio.wait_for(stream.call.read(), timeout=10)
        if reply.WhichOneof("body") == "report_ack":
            acks.append(reply.report_ack.report_seq)
    assert acks == sorted(acks) and len(acks) < len(burst)  # batched, in order
    for uid in uids[:2]:
        job = (await api.get(f"/api/v1/jobs/{uid}")).json()
        assert job["state"] == "Running"
        assert [s["phase"] for s in job["placement"]["shares"]] == ["Running"]
        reasons = [
            e["reason"] for e in (await api.get(f"/api/v1/jobs/{uid}/events")).json()["items"]
        ]
        assert reasons.count("Dispatched") == 1 and reasons.count("Running") == 1
    withdrawn = (await api.get(f"/api/v1/jobs/{uids[2]}")).json()
    assert withdrawn["state"] == "Pending" and withdrawn["placement"]["state"] == "Withdrawn"
    await stream.close()
