"""Driving the Global's agent stream message by message over real gRPC (for tests)."""

from __future__ import annotations

import asyncio

import grpc
import httpx
from fastapi import FastAPI

from tests.factories import REPLY_S, create_cluster
from volcano_global.rpc.v1 import agent_pb2 as pb
from volcano_global.rpc.v1 import agent_pb2_grpc


def node(
    name: str, *, used: int = 0, domain: str = "tor0", ready: bool = True, gpus: int = 8
) -> pb.Node:
    return pb.Node(
        name=name,
        gpu_model="H100",
        gpu_allocatable=gpus,
        gpu_used=used,
        ready=ready,
        schedulable=True,
        domain=domain,
    )


def snapshot(seq: int, nodes: int = 4) -> pb.AgentMessage:
    return pb.AgentMessage(
        snapshot=pb.InventorySnapshot(
            seq=seq,
            domains=[
                pb.Domain(name="spine", tier=2),
                pb.Domain(name="tor0", tier=1, parent="spine"),
            ],
            nodes=[node(f"n{i}") for i in range(nodes)],
        )
    )


class Stream:
    """A raw agent stream for driving the servicer message by message."""

    def __init__(self, app: FastAPI, token: str) -> None:
        self.channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.state.grpc_port}")
        stub = agent_pb2_grpc.AgentServiceStub(self.channel)
        self.call = stub.Connect(metadata=(("authorization", f"Bearer {token}"),))

    async def send(self, message: pb.AgentMessage) -> pb.GlobalMessage:
        await self.call.write(message)
        reply = await asyncio.wait_for(self.call.read(), timeout=REPLY_S)
        assert reply is not grpc.aio.EOF
        return reply

    async def reply(self, message: pb.AgentMessage, kind: str) -> pb.GlobalMessage:
        """Send `message` and return the first reply of `kind` (the `body` field), passing
        over the dispatch messages the Global pushes meanwhile."""
        await self.call.write(message)
        while True:
            reply = await asyncio.wait_for(self.call.read(), timeout=REPLY_S)
            assert reply is not grpc.aio.EOF
            if reply.WhichOneof("body") == kind:
                return reply

    async def hello(self, cluster: str = "gpu-east", last_acked: int = 0) -> pb.Welcome:
        return (
            await self.send(
                pb.AgentMessage(hello=pb.Hello(cluster=cluster, last_acked_seq=last_acked))
            )
        ).welcome

    async def close(self) -> None:
        self.call.cancel()
        await self.channel.close()


async def open_streams(app: FastAPI, api: httpx.AsyncClient, count: int) -> list[Stream]:
    """Streams of `count` new clusters c0, c1, ..., each past its hello."""
    streams = []
    for i in range(count):
        token = (await create_cluster(api, f"c{i}"))["agentToken"]
        stream = Stream(app, token)
        await stream.hello(cluster=f"c{i}")
        streams.append(stream)
    return streams


async def capacity(api: httpx.AsyncClient, cluster: str = "gpu-east") -> list[dict]:
    return (await api.get(f"/api/v1/clusters/{cluster}")).json()["capacity"]
