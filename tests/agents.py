"""Agents for end-to-end tests: a cluster registered with a Global and its agent streaming."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx

from core_agent.client import AgentClient
from core_agent.simulated.cluster import ClusterSpec, SimulatedCluster
from core_agent.sources import InventorySource
from tests.conftest import ADMIN_TOKEN
from tests.server_process import ServerProcess


def run_agent(
    name: str,
    source: InventorySource,
    *,
    target: str,
    token: str,
    stop: asyncio.Event,
    coalesce_s: float = 0.05,
) -> asyncio.Task[None]:
    """The agent of cluster `name`, streaming `source` to the Global at `target` until `stop`."""
    agent = AgentClient(
        cluster=name, target=target, token=token, source=source, coalesce_s=coalesce_s
    )
    return asyncio.create_task(agent.run(stop=stop))


async def join(
    api: httpx.AsyncClient, name: str, source: InventorySource, *, target: str, stop: asyncio.Event
) -> asyncio.Task[None]:
    """Register cluster `name` through `api` (an admin client of the Global), then run its
    agent (`run_agent`)."""
    response = await api.post("/api/v1/clusters", json={"name": name})
    assert response.status_code == 201, response.text
    token = response.json()["agentToken"]
    return run_agent(name, source, target=target, token=token, stop=stop)


@asynccontextmanager
async def scheduling_server(
    tmp_path: Path, name: str, spec: ClusterSpec
) -> AsyncIterator[ServerProcess]:
    """A scheduling `vglobal server` on SQLite with one simulated cluster, `name`, streaming
    to it: what a user's CLI talks to."""
    server = ServerProcess(f"sqlite+aiosqlite:///{tmp_path}/served.db", tmp_path, scheduling=True)
    await asyncio.to_thread(server.start)
    stop = asyncio.Event()
    async with httpx.AsyncClient(
        base_url=server.url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=60
    ) as api:
        cluster = SimulatedCluster.from_spec(name, spec)
        task = await join(api, name, cluster, target=server.grpc_target, stop=stop)
    try:
        yield server
    finally:
        stop.set()
        await task
        server.stop()
