"""An agent streaming to a stand-in Global (a servicer of the test's own) on a real gRPC
socket, for tests of what the agent sends and how it answers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import grpc

from core_agent.client import AgentClient
from core_agent.simulated.cluster import SimulatedCluster
from tests.factories import REPLY_S
from volcano_global.rpc.v1 import agent_pb2_grpc


@asynccontextmanager
async def agent_streaming_to(
    stand_in: agent_pb2_grpc.AgentServiceServicer, cluster: SimulatedCluster
) -> AsyncIterator[AgentClient]:
    """The cluster's agent running (no coalescing window) against `stand_in`; stopped, and
    the server with it, on leaving."""
    server = grpc.aio.server()
    agent_pb2_grpc.add_AgentServiceServicer_to_server(stand_in, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    agent = AgentClient(
        cluster=cluster.name, target=f"127.0.0.1:{port}", token="t", source=cluster, coalesce_s=0
    )
    stop = asyncio.Event()
    task = asyncio.create_task(agent.run(stop=stop))
    try:
        yield agent
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=REPLY_S)
        await server.stop(None)
