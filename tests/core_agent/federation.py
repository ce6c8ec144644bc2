"""A running federation for end-to-end tests: a Global (REST in-process, gRPC on a real
socket, the scheduling loop on) and agents streaming from their sources."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
from fastapi import FastAPI

from core_agent.client import AgentClient
from core_agent.sources import InventorySource
from tests.conftest import ADMIN_TOKEN
from tests.factories import EVENTUALLY_S, create_cluster, eventually
from volcano_global.settings import Settings
from volcano_global.shutdown import settle


@dataclass
class Federation:
    app: FastAPI
    api: httpx.AsyncClient
    agents: dict[str, tuple[AgentClient, asyncio.Event, asyncio.Task[None]]] = field(
        default_factory=dict
    )
    tokens: dict[str, str] = field(default_factory=dict)

    @property
    def grpc_address(self) -> str:
        return f"127.0.0.1:{self.app.state.grpc_port}"

    async def join(
        self, name: str, source: InventorySource, *, target: str | None = None
    ) -> AgentClient:
        """Register the cluster (first time) and start its agent (connecting to `target`, a
        proxy for instance, instead of the Global's address)."""
        if name not in self.tokens:
            self.tokens[name] = (await create_cluster(self.api, name))["agentToken"]
        client = AgentClient(
            cluster=name,
            target=target or self.grpc_address,
            token=self.tokens[name],
            source=source,
            coalesce_s=0.05,
        )
        stop = asyncio.Event()
        self.agents[name] = (client, stop, asyncio.create_task(client.run(stop=stop)))
        return client

    async def leave(self, name: str) -> None:
        """Stop the cluster's agent (its stream closes; the cluster stays registered)."""
        _, stop, task = self.agents.pop(name)
        stop.set()
        # Not wait_for: after its timeout it waits, unbounded, for the cancelled task to end.
        ended = await settle([task], within_s=10)
        assert task in ended, f"the agent of {name} did not stop"
        if not task.cancelled():
            task.result()  # its error, if it failed

    async def ready(self, *names: str) -> None:
        async def check() -> bool:
            items = {c["name"]: c for c in (await self.api.get("/api/v1/clusters")).json()["items"]}
            return all(
                items[n]["state"] == "Ready" and items[n]["inventoryGeneration"] > 0 for n in names
            )

        await eventually(check)

    async def submit(self, document: dict[str, Any]) -> str:
        response = await self.api.post("/api/v1/jobs", json=document)
        assert response.status_code == 201, response.text
        return str(response.json()["uid"])

    async def job(self, uid: str) -> dict[str, Any]:
        return dict((await self.api.get(f"/api/v1/jobs/{uid}")).json())

    async def reasons(self, uid: str) -> list[str]:
        items = (await self.api.get(f"/api/v1/jobs/{uid}/events")).json()["items"]
        return [e["reason"] for e in items]

    async def link(self, a: str, b: str, gbps: float = 400) -> None:
        response = await self.api.post(
            "/api/v1/links", json={"clusterA": a, "clusterB": b, "capacityGbps": gbps}
        )
        assert response.status_code == 201, response.text

    async def event(self, uid: str, reason: str, within: float = EVENTUALLY_S) -> str:
        """Wait for the job's first event with this reason; its message."""
        message = ""

        async def check() -> bool:
            nonlocal message
            items = (await self.api.get(f"/api/v1/jobs/{uid}/events")).json()["items"]
            message = next((e["message"] for e in items if e["reason"] == reason), "")
            return bool(message)

        await eventually(check, within=within)
        return message

    async def reach(self, uid: str, state: str, within: float = EVENTUALLY_S) -> dict[str, Any]:
        job: dict[str, Any] = {}

        async def check() -> bool:
            nonlocal job
            job = await self.job(uid)
            assert job["state"] not in {"Failed", "Cancelled", "Succeeded"} - {state}, job
            return job["state"] == state

        await eventually(check, within=within)
        return job


def settings_for(database_url: str, **overrides: Any) -> Settings:
    agents = {"heartbeat_interval_s": 1, "outbox_poll_s": 0.1, **overrides.pop("agents", {})}
    scheduling = {"interval_s": 0.3, **overrides.pop("scheduling", {})}
    return Settings(
        database_url=database_url,
        admin_token=ADMIN_TOKEN,
        grpc_port=0,
        agents=agents,
        scheduling=scheduling,
        **overrides,
    )


@asynccontextmanager
async def federation(database_url: str, **overrides: Any) -> AsyncIterator[Federation]:
    from volcano_global.app import create_app

    app = create_app(settings_for(database_url, **overrides))
    async with app.router.lifespan_context(app):
        api = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://t",
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        )
        fed = Federation(app, api)
        try:
            yield fed
        finally:
            for name in list(fed.agents):
                await fed.leave(name)
            await api.aclose()
