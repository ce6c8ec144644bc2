"""Hostile agents: seeded random streams of malformed messages (huge node counts, used above
allocatable, duplicate and empty names, domain cycles, wrong sequence numbers, garbage reports,
unknown fields, undecodable bytes). Every stream must end with a deliberate status - never
UNKNOWN or INTERNAL, which would mean an unhandled error, and no servicer error logged - and a
well-behaved cluster's stream keeps working, its inventory untouched.

A write the client makes after the Global has ended the stream (it refused an earlier message)
can fail in the client's gRPC core, which then sets the call's status to INTERNAL "Internal
error from Core" itself (grpc/aio/_call.py, `_write`), the Global's status unseen: such a
stream counts as ended by the Global (`ENDED_FIRST`), not as an INTERNAL from it."""

from __future__ import annotations

import asyncio
import random

import grpc
import httpx
import pytest
from fastapi import FastAPI

from tests.factories import REPLY_S, create_cluster
from tests.grpc_stream import Stream, capacity, snapshot
from volcano_global.rpc.v1 import agent_pb2 as pb

DELIBERATE = {
    grpc.StatusCode.OK,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.CANCELLED,
}
ENDED_FIRST = "ended by the Global before the client's write"


def hostile(rng: random.Random) -> pb.AgentMessage:
    kind = rng.choice(["snapshot", "delta", "report", "heartbeat", "hello", "empty"])
    if kind == "snapshot":
        count = rng.choice([0, 1, 3, 2000])
        nodes = [
            pb.Node(
                name=rng.choice(["", "n", f"n{i}", "x" * 300]),
                gpu_model=rng.choice(["H100", "", "\u00e9" * 50]),
                gpu_allocatable=rng.choice([0, 8, 2**32 - 1]),
                gpu_used=rng.choice([0, 9, 2**32 - 1]),
                cpu_allocatable_millis=rng.choice([0, 192_000, 2**63, 2**64 - 1]),
                memory_allocatable_bytes=rng.choice([0, 2**40, 2**63, 2**64 - 1]),
                domain=rng.choice(["", "tor0", "nowhere"]),
                labels={"k" * rng.randint(1, 400): "v"},
            )
            for i in range(count)
        ]
        domains = [
            pb.Domain(name="tor0", tier=rng.choice([0, 1, 99]), parent=rng.choice(["", "tor0"]))
        ]
        return pb.AgentMessage(
            snapshot=pb.InventorySnapshot(
                seq=rng.choice([0, 1, 2**63]), nodes=nodes, domains=domains
            )
        )
    if kind == "delta":
        return pb.AgentMessage(
            delta=pb.InventoryDelta(
                seq=rng.choice([0, 1, 5, 2**64 - 1]),
                node_removals=[rng.choice(["", "ghost", "n0"])],
                node_upserts=[pb.Node(name="n0", gpu_allocatable=1, gpu_used=5)],
                domain_removals=[rng.choice(["", "tor0", "spine"])],
            )
        )
    if kind == "report":
        return pb.AgentMessage(
            job_status=pb.JobStatusReport(
                placement_id=rng.choice(["", "not-a-uuid", "00000000-0000-0000-0000-000000000000"]),
                phase=rng.choice([pb.SHARE_PHASE_UNSPECIFIED, pb.SHARE_PHASE_RUNNING, 99]),
                message="m" * rng.choice([0, 10_000]),
            )
        )
    if kind == "heartbeat":
        return pb.AgentMessage(heartbeat=pb.Heartbeat(sent_unix_millis=rng.choice([-1, 0, 2**62])))
    if kind == "hello":
        return pb.AgentMessage(
            hello=pb.Hello(
                cluster=rng.choice(["gpu-east", "gpu-west", ""]),
                agent_version=rng.choice(["", "1.0", "v\x00x", "v" * 10_000, "\u202e"]),
                source=rng.choice(["", "kubernetes", "\x00", "\n\r"]),
            )
        )
    return pb.AgentMessage()


class _EndedFirst(Exception):
    pass


async def write(stream: Stream, message: pb.AgentMessage) -> None:
    try:
        await stream.call.write(message)
    except grpc.aio.AioRpcError as exc:
        if exc.code() == grpc.StatusCode.INTERNAL and exc.details() == "Internal error from Core":
            raise _EndedFirst from exc  # set by the client's core, not sent by the Global
        raise


async def one_stream(app: FastAPI, token: str, rng: random.Random) -> grpc.StatusCode | str:
    stream = Stream(app, token)
    try:
        if rng.random() < 0.9:
            first = hostile(rng) if rng.random() < 0.3 else None
            if first is None or first.WhichOneof("body") != "hello":
                first = pb.AgentMessage(hello=pb.Hello(cluster="gpu-east"))
            await write(stream, first)
        for _ in range(rng.randint(1, 4)):
            message = hostile(rng)
            if rng.random() < 0.2:  # a field this Global does not know (a newer agent)
                raw = message.SerializeToString() + b"\xf8\x07\x01"  # field 127, varint 1
                message = pb.AgentMessage.FromString(raw)
            await write(stream, message)
        await stream.call.done_writing()
        while await asyncio.wait_for(stream.call.read(), timeout=REPLY_S) is not grpc.aio.EOF:
            pass
        return await stream.call.code()
    except _EndedFirst:
        return ENDED_FIRST
    except grpc.aio.AioRpcError as exc:
        return exc.code()
    except asyncio.InvalidStateError:
        return await stream.call.code()
    finally:
        await stream.close()


async def undecodable(app: FastAPI, token: str) -> grpc.StatusCode:
    """Bytes that are not an AgentMessage at all."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{app.state.grpc_port}") as channel:
        call = channel.stream_stream(
            "/volcano_global.rpc.v1.AgentService/Connect",
            request_serializer=lambda raw: raw,
            response_deserializer=lambda raw: raw,
        )(metadata=(("authorization", f"Bearer {token}"),))
        await call.write(b"\xff\xff\xff\xff garbage")
        await call.done_writing()
        try:
            async for _ in call:
                pass
        except grpc.aio.AioRpcError as exc:
            return exc.code()
        return await call.code()


async def test_hostile_streams_never_crash_the_global_or_touch_other_clusters(
    app: FastAPI, api: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    east = (await create_cluster(api, "gpu-east"))["agentToken"]
    west = (await create_cluster(api, "gpu-west"))["agentToken"]
    good = Stream(app, west)
    await good.hello("gpu-west")
    assert (await good.send(snapshot(1))).ack.seq == 1
    before = await capacity(api, "gpu-west")

    rng = random.Random(20261130)
    codes = [await one_stream(app, east, rng) for _ in range(120)]
    codes.append(await undecodable(app, east))
    unexpected = [c for c in codes if c not in DELIBERATE and c != ENDED_FIRST]
    assert unexpected == [], unexpected
    crashes = [r.getMessage() for r in caplog.records if "raised by servicer" in r.getMessage()]
    assert crashes == []
    assert grpc.StatusCode.INVALID_ARGUMENT in codes  # the hostile ones were refused

    reply = await good.send(pb.AgentMessage(delta=pb.InventoryDelta(seq=2, node_removals=["n0"])))
    assert reply.ack.seq == 2  # the well-behaved stream carried on throughout
    assert (await capacity(api, "gpu-west"))[0]["total"] == before[0]["total"] - 8
    assert (await api.get("/readyz")).status_code == 200
    await good.close()


async def test_a_hello_with_a_nul_or_a_novel_of_a_version_is_refused_naming_the_field(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    token = (await create_cluster(api, "gpu-east"))["agentToken"]
    for field, value in (("agent_version", "1.0\x00"), ("source", "s" * 129)):
        stream = Stream(app, token)
        await stream.call.write(
            pb.AgentMessage(hello=pb.Hello(cluster="gpu-east", **{field: value}))
        )
        try:
            await stream.call.read()
        except grpc.aio.AioRpcError:
            pass
        assert await stream.call.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert (await stream.call.details()).startswith(f"hello.{field}: must be at most 128")
        await stream.close()
    events = (await api.get("/api/v1/clusters/gpu-east/events")).json()["items"]
    assert not any(e["reason"] == "AgentConnected" for e in events)
