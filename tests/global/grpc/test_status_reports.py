"""Agent status reports over a real gRPC stream (SQLite and Postgres; no scheduling loop: the
test runs the round that places the jobs)."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import event, select

from tests.factories import REPLY_S, create_cluster, job_document, split_annotations, submit
from tests.grpc_stream import Stream, snapshot
from volcano_global.db.engine import transaction
from volcano_global.db.models import Cluster, OutboxMessage
from volcano_global.rpc.shares import SharePhase
from volcano_global.rpc.v1 import agent_pb2 as pb
from volcano_global.services.dispatch import reports
from volcano_global.services.dispatch.reports import ShareReport


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
    assert report is not None
    assert sorted(report.result.placed) == sorted(uids)
    placement = {
        uid: (await api.get(f"/api/v1/jobs/{uid}")).json()["placement"]["uid"] for uid in uids
    }
    a, b, c = (placement[uid] for uid in uids)
    accepted, running = pb.SHARE_PHASE_ACCEPTED, pb.SHARE_PHASE_RUNNING
    burst = [
        (a, accepted),
        (b, accepted),
        (a, running),
        (b, running),
        (a, accepted),  # resent after a newer one
        (c, pb.SHARE_PHASE_FAILED),
        (str(uuid.uuid4()), running),  # a placement the Global does not know
    ]
    for seq, (placement_id, phase) in enumerate(burst, start=1):
        status = pb.JobStatusReport(placement_id=placement_id, phase=phase, report_seq=seq)
        await stream.call.write(pb.AgentMessage(job_status=status))
    acks = []
    while not acks or acks[-1] < len(burst):
        reply = await asyncio.wait_for(stream.call.read(), timeout=REPLY_S)
        if reply.WhichOneof("body") == "report_ack":
            acks.append(reply.report_ack.report_seq)
    assert acks == sorted(acks)
    assert len(acks) < len(burst)  # batched, in order
    for uid in uids[:2]:
        job = (await api.get(f"/api/v1/jobs/{uid}")).json()
        assert job["state"] == "Running"
        assert [s["phase"] for s in job["placement"]["shares"]] == ["Running"]
        reasons = [
            e["reason"] for e in (await api.get(f"/api/v1/jobs/{uid}/events")).json()["items"]
        ]
        assert reasons.count("Dispatched") == 1
        assert reasons.count("Running") == 1
    withdrawn = (await api.get(f"/api/v1/jobs/{uids[2]}")).json()
    assert withdrawn["state"] == "Pending"
    assert withdrawn["placement"]["state"] == "Withdrawn"
    await stream.close()


async def test_reports_of_several_clusters_are_applied_in_one_transaction(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    """The streams' report batches that queue together are one transaction; each report
    moves only its own cluster's share and acknowledges only the dispatch message to its own
    cluster (a report naming another cluster's placement changes nothing)."""
    clusters = {}
    for name in ("east", "west", "north"):
        created = await create_cluster(api, name)
        stream = Stream(app, created["agentToken"])
        await stream.hello(name)
        assert (await stream.send(snapshot(1, nodes=1))).ack.seq == 1
        async with transaction(app.state.sessions) as session:
            cluster_id = await session.scalar(select(Cluster.id).where(Cluster.name == name))
        clusters[name] = (cluster_id, stream)
    uids = [(await submit(api, job_document(f"j{i}", replicas=1))).json()["uid"] for i in range(3)]
    report = await app.state.scheduler.run_once()
    assert report is not None
    assert len(report.result.placed) == 3  # one 8-GPU node each
    where = {}  # cluster name -> (job uid, placement id)
    for uid in uids:
        placement = (await api.get(f"/api/v1/jobs/{uid}")).json()["placement"]
        where[placement["shares"][0]["cluster"]] = (uid, uuid.UUID(placement["uid"]))
    assert sorted(where) == ["east", "north", "west"]
    transactions = []

    def count(conn: object, cursor: object, statement: str, *args: object) -> None:
        if statement.startswith(f"UPDATE {OutboxMessage.__tablename__}"):
            transactions.append(statement)  # the acknowledgements: one statement a transaction

    writer = reports.report_writer(app.state.sessions)
    engine = app.state.engine.sync_engine
    event.listen(engine, "before_cursor_execute", count)
    try:
        await asyncio.gather(
            writer.add([ShareReport(clusters["east"][0], where["east"][1], SharePhase.ACCEPTED)]),
            writer.add([ShareReport(clusters["west"][0], where["west"][1], SharePhase.RUNNING)]),
            # east speaking of north's placement: not its share, not its message
            writer.add([ShareReport(clusters["east"][0], where["north"][1], SharePhase.RUNNING)]),
        )
    finally:
        event.remove(engine, "before_cursor_execute", count)
    assert len(transactions) == 1
    states = {
        name: (await api.get(f"/api/v1/jobs/{uid}")).json()["state"]
        for name, (uid, _) in where.items()
    }
    assert states == {"east": "Dispatched", "west": "Running", "north": "Placed"}
    async with transaction(app.state.sessions) as session:
        rows = (
            await session.execute(
                select(OutboxMessage.placement_id, OutboxMessage.acked_at, OutboxMessage.payload)
            )
        ).all()
    acked = {placement: acked_at is not None for placement, acked_at, _ in rows}
    assert acked == {where["east"][1]: True, where["west"][1]: True, where["north"][1]: False}
    # an acknowledged assignment's job token leaves the table; the rest of it stays
    tokens = {placement: payload.get("job_token") for placement, _, payload in rows}
    assert tokens[where["east"][1]] is None and tokens[where["west"][1]] is None
    assert str(tokens[where["north"][1]]).startswith("vg_")
    assert all(payload["job_uid"] for _, _, payload in rows)
    for _, stream in clusters.values():
        await stream.close()


WARNING = "rank 0 cannot be reached from the other clusters"


@pytest.mark.parametrize(
    "fields",
    [
        {"phase": pb.SHARE_PHASE_ACCEPTED, "warning": WARNING},
        # an agent of before SharePhase: the phase by name, the warning a message prefix
        {"phase_name": "Accepted", "message": f"warning: {WARNING}"},
    ],
    ids=["agent", "agent-before-share-phase"],
)
async def test_a_reported_warning_is_a_warning_event_and_shows_with_the_share(
    app: FastAPI, api: httpx.AsyncClient, east: str, fields: dict[str, object]
) -> None:
    """The share runs (the report moves it), and the user is told: a Warning event naming
    the cluster, and the share's message marked as a warning."""
    stream = Stream(app, east)
    await stream.hello()
    assert (await stream.send(snapshot(1))).ack.seq == 1
    uid = (await submit(api, job_document("train", replicas=1))).json()["uid"]
    assert await app.state.scheduler.run_once() is not None
    placement = (await api.get(f"/api/v1/jobs/{uid}")).json()["placement"]["uid"]
    status = pb.JobStatusReport(placement_id=placement, report_seq=1, **fields)
    await stream.call.write(pb.AgentMessage(job_status=status))
    kind = None
    while kind != "report_ack":  # (the assignment comes first)
        kind = (await asyncio.wait_for(stream.call.read(), timeout=REPLY_S)).WhichOneof("body")
    events = (await api.get(f"/api/v1/jobs/{uid}/events")).json()["items"]
    warnings = [(e["type"], e["message"]) for e in events if e["reason"] == "ClusterWarning"]
    assert warnings == [("Warning", "gpu-east: rank 0 cannot be reached from the other clusters")]
    job = (await api.get(f"/api/v1/jobs/{uid}")).json()
    assert job["state"] == "Dispatched"
    (share,) = job["placement"]["shares"]
    assert share["phase"] == "Accepted"
    assert share["message"] == "warning: rank 0 cannot be reached from the other clusters"
    await stream.close()


async def test_a_share_that_succeeds_after_its_peers_started_completes_the_gang(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    """A split job's share reports Succeeded without a Running before it (its agent did not
    see its pods run: it was restarting) while the other share already runs: every share has
    started, so the gang ran together; the job runs on, it is not withdrawn as broken."""
    streams, ids = {}, {}
    for name in ("east", "west"):
        created = await create_cluster(api, name)
        stream = Stream(app, created["agentToken"])
        await stream.hello(name)
        assert (await stream.send(snapshot(1, nodes=1))).ack.seq == 1
        async with transaction(app.state.sessions) as session:
            ids[name] = await session.scalar(select(Cluster.id).where(Cluster.name == name))
        streams[name] = stream
    link = {"clusterA": "east", "clusterB": "west", "capacityGbps": 100}
    assert (await api.post("/api/v1/links", json=link)).status_code == 201
    document = job_document("split", replicas=2)
    document["metadata"]["annotations"] = split_annotations(1)
    uid = (await submit(api, document)).json()["uid"]
    assert await app.state.scheduler.run_once() is not None
    shown = (await api.get(f"/api/v1/jobs/{uid}")).json()
    placement = shown["placement"]
    assert placement is not None, shown["pendingReason"]
    assert sorted(s["cluster"] for s in placement["shares"]) == ["east", "west"], placement
    pid = uuid.UUID(placement["uid"])
    writer = reports.report_writer(app.state.sessions)
    for name in ("east", "west"):
        await writer.add([ShareReport(ids[name], pid, SharePhase.ACCEPTED)])
    await writer.add([ShareReport(ids["west"], pid, SharePhase.RUNNING)])
    await writer.add([ShareReport(ids["east"], pid, SharePhase.SUCCEEDED)])
    job = (await api.get(f"/api/v1/jobs/{uid}")).json()
    assert job["state"] == "Running", job["stateMessage"]
    await writer.add([ShareReport(ids["west"], pid, SharePhase.SUCCEEDED)])
    assert (await api.get(f"/api/v1/jobs/{uid}")).json()["state"] == "Succeeded"
    for stream in streams.values():
        await stream.close()
