"""Agents for end-to-end tests: a cluster registered with a Global and its agent streaming."""

from __future__ import annotations

import asyncio

import httpx

from core_agent.client import AgentClient
from core_agent.sources import InventorySource


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
