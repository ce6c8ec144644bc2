"""An agent's list of every share its cluster holds (`ShareInventory`) over a real gRPC stream
(SQLite and Postgres; no scheduling loop: the test runs the round that places the jobs), and
what the Global makes of it: what never started is sent again, what ran and is gone is lost,
what the cluster holds for no active placement is cancelled; twice the same list changes
nothing more."""

from __future__ import annotations

import asyncio
import uuid

import grpc
import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import func, select

from tests.factories import REPLY_S, job_document, submit
from tests.grpc_stream import Stream, snapshot
from volcano_global.db.engine import reading
from volcano_global.db.models import OutboxKind, OutboxMessage, Placement
from volcano_global.rpc.v1 import agent_pb2 as pb
from volcano_global.services.dispatch.reconcile import reconcile_cluster
from volcano_global.services.inventory.clusters import lock_cluster

ACCEPTED, RUNNING = pb.SHARE_PHASE_ACCEPTED, pb.SHARE_PHASE_RUNNING
SUCCEEDED = pb.SHARE_PHASE_SUCCEEDED


async def _placed(app: FastAPI, api: httpx.AsyncClient, stream: Stream, names: list[str]) -> dict:
    """The jobs placed on gpu-east by one round: name -> (job uid, placement id)."""
    await stream.hello()
    assert (await stream.send(snapshot(1, nodes=8))).ack.seq == 1
    uids = {n: (await submit(api, job_document(n, replicas=1))).json()["uid"] for n in names}
    assert await app.state.scheduler.run_once() is not None
    return {
        n: (uid, (await api.get(f"/api/v1/jobs/{uid}")).json()["placement"]["uid"])
        for n, uid in uids.items()
    }


async def _report(stream: Stream, seq: int, placement_id: str, phase: int) -> None:
    status = pb.JobStatusReport(placement_id=placement_id, phase=phase, report_seq=seq)
    await stream.reply(pb.AgentMessage(job_status=status), "report_ack")


async def _messages_until(stream: Stream, wanted: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """(kind, placement id) of every message the Global sends until all of `wanted` came."""
    seen: set[tuple[str, str]] = set()
    while not wanted <= seen:
        reply = await asyncio.wait_for(stream.call.read(), timeout=REPLY_S)
        assert reply is not grpc.aio.EOF
        kind = reply.WhichOneof("body")
        if kind in ("assignment", "cancellation"):
            seen.add((kind, getattr(reply, kind).placement_id))
    return seen


async def _assignments(app: FastAPI, placement_id: str) -> int:
    async with reading(app.state.sessions) as session:
        count = await session.execute(
            select(func.count()).where(
                OutboxMessage.placement_id == uuid.UUID(placement_id),
                OutboxMessage.kind == OutboxKind.ASSIGN,
            )
        )
        return int(count.scalar_one())


async def test_the_global_converges_with_the_shares_a_cluster_lists(
    app: FastAPI, api: httpx.AsyncClient, east: str
) -> None:
    stream = Stream(app, east)
    jobs = await _placed(app, api, stream, ["accepted", "running", "assigned", "done"])
    pid = {name: placement for name, (_, placement) in jobs.items()}
    seq = 0
    for name, phases in {
        "accepted": [ACCEPTED],
        "running": [ACCEPTED, RUNNING],
        "done": [ACCEPTED, RUNNING, SUCCEEDED],
    }.items():
        for phase in phases:
            seq += 1
            await _report(stream, seq, pid[name], phase)
    unknown = str(uuid.uuid4())
    # The cluster restarted: it holds none of the active shares, still runs the finished job's
    # (its placement is over), one of a placement no Global wrote, and a label that is no id.
    listed = pb.ShareInventory(
        reason="connect",
        shares=[
            pb.HeldShare(placement_id=pid["done"], phase=RUNNING),
            pb.HeldShare(placement_id=unknown, phase=ACCEPTED),
            pb.HeldShare(placement_id="not-a-placement", phase=RUNNING),
        ],
    )
    await stream.call.write(pb.AgentMessage(shares=listed))
    seen = await _messages_until(
        stream,
        {
            ("cancellation", pid["done"]),  # held for an ended placement
            ("cancellation", unknown),  # held for a placement the Global does not know
            ("assignment", pid["accepted"]),  # never started: sent again
            ("cancellation", pid["running"]),  # lost: its gang ends everywhere
        },
    )
    assert ("assignment", pid["assigned"]) not in seen  # still on its way: not sent twice
    assert await _assignments(app, pid["assigned"]) == 1
    assert await _assignments(app, pid["accepted"]) == 2

    running_uid = jobs["running"][0]
    job = (await api.get(f"/api/v1/jobs/{running_uid}")).json()
    assert job["state"] == "Pending"
    assert "cluster gpu-east no longer holds its share (1 pods, 8 GPUs)" in job["stateMessage"]
    assert "requeued (retry 1/3)" in job["stateMessage"]
    events = (await api.get(f"/api/v1/jobs/{running_uid}/events")).json()["items"]
    assert "PodEvicted" in [e["reason"] for e in events]
    accepted = (await api.get(f"/api/v1/jobs/{jobs['accepted'][0]}")).json()
    assert accepted["state"] == "Dispatched"
    assert accepted["placement"]["shares"][0]["phase"] == "Assigned"  # until it is applied again
    cluster_events = (await api.get("/api/v1/clusters/gpu-east/events")).json()["items"]
    assert [e["reason"] for e in cluster_events].count("ShareLost") == 1

    # The same list again: the re-sent assignment is on its way, nothing is lost twice.
    await stream.call.write(pb.AgentMessage(shares=listed))
    await _messages_until(stream, {("cancellation", pid["done"]), ("cancellation", unknown)})
    assert await _assignments(app, pid["accepted"]) == 2
    cluster_events = (await api.get("/api/v1/clusters/gpu-east/events")).json()["items"]
    assert [e["reason"] for e in cluster_events].count("ShareLost") == 1
    await stream.close()


async def test_a_listed_share_without_a_phase_is_refused_naming_it(
    app: FastAPI, api: httpx.AsyncClient, east: str
) -> None:
    stream = Stream(app, east)
    await stream.hello()
    listed = pb.ShareInventory(
        shares=[
            pb.HeldShare(placement_id=str(uuid.uuid4()), phase=RUNNING),
            pb.HeldShare(placement_id=str(uuid.uuid4())),
        ]
    )
    await stream.call.write(pb.AgentMessage(shares=listed))
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        while True:
            await asyncio.wait_for(stream.call.read(), timeout=REPLY_S)
    assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "shares.shares[1].phase" in (refused.value.details() or "")
    await stream.close()


async def test_the_welcome_asks_for_the_list_every_period(
    app: FastAPI, api: httpx.AsyncClient, east: str
) -> None:
    stream = Stream(app, east)
    welcome = await stream.hello()
    assert welcome.share_inventory_interval_seconds == 180  # the default setting
    await stream.close()


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)  # row locks
async def test_a_report_writes_a_clusters_messages_while_a_reconciliation_holds_it(
    app: FastAPI, api: httpx.AsyncClient, east: str, database_url: str
) -> None:
    """A reconciliation locks the cluster, then its placements; a report's transaction locks a
    placement, then (ending it) writes the cancellations of every cluster it holds, which
    references the cluster's row. Had the reconciliation locked the row against that reference
    (FOR UPDATE), each would wait on the other: Postgres would abort one (a deadlock)."""
    stream = Stream(app, east)
    jobs = await _placed(app, api, stream, ["job"])
    placement_id = uuid.UUID(jobs["job"][1])
    async with app.state.sessions() as reconciling, reconciling.begin():
        cluster = await lock_cluster(reconciling, name="gpu-east")
        async with app.state.sessions() as report, report.begin():
            await report.execute(
                select(Placement).where(Placement.id == placement_id).with_for_update()
            )
            report.add(
                OutboxMessage(
                    cluster_id=cluster.id,
                    placement_id=placement_id,
                    kind=OutboxKind.CANCEL,
                    payload={},
                )
            )
            await asyncio.wait_for(report.flush(), timeout=REPLY_S)
        done = await asyncio.wait_for(
            reconcile_cluster(reconciling, cluster=cluster, held=[]), timeout=5
        )
    assert done.resent == [placement_id]  # never started, not held: its assignment again
