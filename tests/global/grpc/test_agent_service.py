"""The Global's agent stream over real loopback gRPC, on SQLite and Postgres."""

from __future__ import annotations

import asyncio
import uuid

import grpc
import httpx
import pytest
from fastapi import FastAPI

from tests.factories import REPLY_S, create_cluster
from tests.grpc_stream import Stream, capacity, node, snapshot
from volcano_global.rpc.v1 import agent_pb2 as pb
from volcano_global.settings import Settings


async def test_snapshot_then_deltas_in_order(
    app: FastAPI, api: httpx.AsyncClient, east: str
) -> None:
    stream = Stream(app, east)
    welcome = await stream.hello()
    assert welcome.snapshot_required
    assert welcome.applied_seq == 0
    assert (await stream.send(snapshot(10))).ack.seq == 10
    assert await capacity(api) == [{"gpuModel": "H100", "total": 32, "free": 32, "used": 0}]

    delta = pb.InventoryDelta(
        seq=11, node_upserts=[node("n0", used=8), node("n9")], node_removals=["n1"]
    )
    assert (await stream.send(pb.AgentMessage(delta=delta))).ack.seq == 11
    assert await capacity(api) == [{"gpuModel": "H100", "total": 32, "free": 24, "used": 8}]
    tors = {
        d["name"]: d
        for d in (await api.get("/api/v1/clusters/gpu-east/topology")).json()["domains"]
    }
    assert tors["tor0"]["capacity"][0] == {"gpuModel": "H100", "total": 32, "free": 24, "used": 8}
    assert tors["spine"]["nodes"] == 4

    # A duplicate is acknowledged with what is applied and changes nothing.
    assert (await stream.send(pb.AgentMessage(delta=delta))).ack.seq == 11
    assert await capacity(api) == [{"gpuModel": "H100", "total": 32, "free": 24, "used": 8}]
    # A gap asks for a resync.
    gap = pb.InventoryDelta(seq=13, node_removals=["n2"])
    reply = await stream.send(pb.AgentMessage(delta=gap))
    assert reply.WhichOneof("body") == "resync"
    assert reply.resync.applied_seq == 11
    assert reply.resync.reason == "gap: expected seq 12, got 13"
    # A node going NotReady frees nothing; a domain change re-reads the inventory.
    down = pb.InventoryDelta(
        seq=12,
        node_upserts=[node("n3", ready=False)],
        domain_upserts=[pb.Domain(name="tor1", tier=1, parent="spine")],
    )
    assert (await stream.send(pb.AgentMessage(delta=down))).ack.seq == 12
    assert await capacity(api) == [{"gpuModel": "H100", "total": 32, "free": 16, "used": 16}]
    await stream.close()

    # Reconnecting: the Global says what it holds, no snapshot needed.
    again = Stream(app, east)
    welcome = await again.hello(last_acked=11)
    assert (welcome.applied_seq, welcome.snapshot_required) == (12, False)
    await again.close()


async def test_delta_before_any_snapshot_asks_for_one(app: FastAPI, east: str) -> None:
    stream = Stream(app, east)
    await stream.hello()
    reply = await stream.send(pb.AgentMessage(delta=pb.InventoryDelta(seq=1, node_removals=["x"])))
    assert reply.resync.reason == "no inventory yet: send a snapshot"
    await stream.close()


async def test_an_empty_delta_moves_the_applied_seq(
    app: FastAPI, api: httpx.AsyncClient, east: str
) -> None:
    """An empty delta (nothing changed since the last one) is acknowledged only once its
    number is stored: the next delta follows on, no resync, and a reconnect resumes after it."""
    stream = Stream(app, east)
    await stream.hello()
    assert (await stream.send(snapshot(10))).ack.seq == 10
    assert (await stream.send(pb.AgentMessage(delta=pb.InventoryDelta(seq=11)))).ack.seq == 11
    delta = pb.InventoryDelta(seq=12, node_upserts=[node("n0", used=8)])
    reply = await stream.send(pb.AgentMessage(delta=delta))
    assert reply.WhichOneof("body") == "ack", reply
    assert reply.ack.seq == 12
    assert await capacity(api) == [{"gpuModel": "H100", "total": 32, "free": 24, "used": 8}]
    # Empty deltas at the end of a burst (applied together) count as well.
    for seq in (13, 14):
        await stream.call.write(pb.AgentMessage(delta=pb.InventoryDelta(seq=seq)))
    acked = 0
    while acked < 14:
        reply = await asyncio.wait_for(stream.call.read(), timeout=REPLY_S)
        assert reply.WhichOneof("body") == "ack", reply
        acked = reply.ack.seq
    await stream.close()
    again = Stream(app, east)
    welcome = await again.hello(last_acked=14)
    assert (welcome.applied_seq, welcome.snapshot_required) == (14, False)
    await again.close()


async def test_token_is_bound_to_its_cluster(
    app: FastAPI, api: httpx.AsyncClient, east: str
) -> None:
    await create_cluster(api, "gpu-west")
    stream = Stream(app, east)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stream.hello("gpu-west")
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert caught.value.details() == "agent:gpu-east may not act for cluster 'gpu-west'"
    await stream.close()
    for token, code in (
        ("vg_wrong", grpc.StatusCode.UNAUTHENTICATED),
        ("", grpc.StatusCode.UNAUTHENTICATED),
    ):
        stream = Stream(app, token)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stream.hello()
        assert caught.value.code() == code
        await stream.close()


async def test_bad_messages_get_a_clear_status_and_spare_other_streams(
    app: FastAPI, api: httpx.AsyncClient, east: str
) -> None:
    west = str((await create_cluster(api, "gpu-west"))["agentToken"])
    healthy = Stream(app, west)
    await healthy.hello("gpu-west")

    first_not_hello = Stream(app, east)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await first_not_hello.send(snapshot(1))
    assert (caught.value.code(), caught.value.details()) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "the first message must be hello",
    )
    await first_not_hello.close()

    bad = Stream(app, east)
    await bad.hello()
    broken = snapshot(1)
    broken.snapshot.nodes[2].gpu_used = 9
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await bad.send(broken)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert caught.value.details() == "snapshot.nodes[2]: gpuUsed (9) exceeds gpuAllocatable (8)"
    await bad.close()

    unknown = Stream(app, east)
    await unknown.hello()
    await unknown.send(snapshot(1))
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await unknown.send(
            pb.AgentMessage(
                delta=pb.InventoryDelta(seq=2, node_upserts=[node("n7", domain="nowhere")])
            )
        )
    assert caught.value.details() == "nodeUpserts[0].domain: unknown domain 'nowhere'"
    await unknown.close()

    # A report of an agent of before SharePhase (the phase by name in field 3, a warning as a
    # message prefix) is still applied and acknowledged, for one release.
    old_agent = Stream(app, east)
    await old_agent.hello()
    legacy = pb.JobStatusReport.FromString(
        pb.JobStatusReport(placement_id=str(uuid.uuid4()), report_seq=1).SerializeToString()
        + b"\x1a\x07Running"  # field 3, length 7
    )
    assert legacy.phase == pb.SHARE_PHASE_UNSPECIFIED
    assert (await old_agent.send(pb.AgentMessage(job_status=legacy))).report_ack.report_seq == 1
    # ... but not a name that is no phase.
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await old_agent.send(
            pb.AgentMessage(
                job_status=pb.JobStatusReport(
                    placement_id=str(uuid.uuid4()), phase_name="Assigned", report_seq=2
                )
            )
        )
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert caught.value.details() == (
        "job_status.phase_name: unknown phase 'Assigned': one of Staging, Accepted, Running, "
        "Succeeded, Failed, Cancelled, Restarting"
    )
    await old_agent.close()

    # A report with no phase at all is refused naming the field.
    no_phase = Stream(app, east)
    await no_phase.hello()
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await no_phase.send(
            pb.AgentMessage(
                job_status=pb.JobStatusReport(placement_id=str(uuid.uuid4()), report_seq=3)
            )
        )
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert caught.value.details() == (
        "job_status.phase: must be set: one of SHARE_PHASE_STAGING, SHARE_PHASE_ACCEPTED, "
        "SHARE_PHASE_RUNNING, SHARE_PHASE_SUCCEEDED, SHARE_PHASE_FAILED, SHARE_PHASE_CANCELLED, "
        "SHARE_PHASE_RESTARTING"
    )
    await no_phase.close()

    # The other cluster's stream is untouched.
    assert (await healthy.send(snapshot(5))).ack.seq == 5
    await healthy.close()


@pytest.fixture
def settings(database_url: str) -> Settings:
    from tests.conftest import ADMIN_TOKEN

    return Settings(
        database_url=database_url,
        admin_token=ADMIN_TOKEN,
        grpc_port=0,
        agents={
            "heartbeat_timeout_s": 0.6,
            "heartbeat_interval_s": 1,
            "max_message_bytes": 1 << 20,
        },
    )


async def test_oversized_message_is_refused(app: FastAPI, east: str) -> None:
    stream = Stream(app, east)
    await stream.hello()
    huge = snapshot(1, nodes=0)
    huge.snapshot.nodes.extend(node(f"node-with-a-long-name-{i:08d}") for i in range(40_000))
    assert huge.ByteSize() > 1 << 20
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stream.send(huge)
    assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    await stream.close()


async def test_silent_agent_makes_its_cluster_not_ready_and_back(
    app: FastAPI, api: httpx.AsyncClient, east: str
) -> None:
    stream = Stream(app, east)

    async def state() -> str:
        return str((await api.get("/api/v1/clusters/gpu-east")).json()["state"])

    async def becomes(wanted: str) -> None:
        for _ in range(100):
            if await state() == wanted:
                return
            await asyncio.sleep(0.05)
        assert await state() == wanted

    async def beating_until(wanted: str) -> None:
        """Heartbeats every 0.2 s, as an agent sends them (a loaded machine may exceed the
        timeout between two), until the state is `wanted`; never cut mid-write, which would
        end the stream."""
        for _ in range(100):
            await stream.call.write(pb.AgentMessage(heartbeat=pb.Heartbeat(sent_unix_millis=1)))
            if await state() == wanted:
                return
            await asyncio.sleep(0.2)
        assert await state() == wanted

    await stream.hello()
    await beating_until("Ready")
    await becomes("NotReady")
    await beating_until("Ready")
    reasons = [
        e["reason"] for e in (await api.get("/api/v1/clusters/gpu-east/events")).json()["items"]
    ]
    oldest_first = reasons[::-1]  # the API lists the newest first
    not_ready = oldest_first.index("NotReady", oldest_first.index("AgentConnected"))
    assert "Ready" in oldest_first[not_ready:], reasons
    await stream.close()


async def test_standard_health_service(app: FastAPI) -> None:
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    async with grpc.aio.insecure_channel(f"127.0.0.1:{app.state.grpc_port}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        for service in ("", "volcano_global.rpc.v1.AgentService"):
            reply = await stub.Check(health_pb2.HealthCheckRequest(service=service))
            assert reply.status == health_pb2.HealthCheckResponse.SERVING


async def test_a_burst_of_deltas_is_applied_in_order_whatever_the_batching(
    app: FastAPI, api: httpx.AsyncClient, east: str
) -> None:
    """Deltas written without waiting for acks queue up and are applied together: the result
    is the same as one at a time, including a node removed then added again, a node changed
    many times, duplicates, and a HyperNode change in the middle."""
    stream = Stream(app, east)
    await stream.hello()
    assert (await stream.send(snapshot(1, nodes=8))).ack.seq == 1
    messages = []
    for seq in range(2, 62):
        i = seq % 8
        domain = "tor1" if i == 7 and seq > 30 else "tor0"
        delta = pb.InventoryDelta(
            seq=seq, node_upserts=[node(f"n{i}", used=seq % 9, domain=domain)]
        )
        if seq == 20:
            delta = pb.InventoryDelta(seq=seq, node_removals=["n7"])
        if seq == 30:
            delta.domain_upserts.append(pb.Domain(name="tor1", tier=1, parent="spine"))
            delta.node_upserts.append(node("n7", domain="tor1", used=2))
        messages.append(pb.AgentMessage(delta=delta))
    messages.insert(10, messages[5])  # a duplicate inside the burst
    for message in messages:
        await stream.call.write(message)
    acked = 0
    while acked < 61:
        reply = await asyncio.wait_for(stream.call.read(), timeout=REPLY_S)
        assert reply.WhichOneof("body") == "ack", reply
        assert reply.ack.seq >= acked
        acked = reply.ack.seq
    # Last use of each node: n(i) for seq in 54..61, n7 by seq 55 (after its re-adding).
    used = {f"n{seq % 8}": seq % 9 for seq in range(54, 62)}
    expected_used = sum(used.values())
    assert await capacity(api) == [
        {"gpuModel": "H100", "total": 64, "free": 64 - expected_used, "used": expected_used}
    ]
    tors = {
        d["name"]: d
        for d in (await api.get("/api/v1/clusters/gpu-east/topology")).json()["domains"]
    }
    assert tors["tor1"]["nodes"] == 1
    assert tors["spine"]["nodes"] == 8
    await stream.close()
