"""Fixtures of the console tests: a real `vglobal server` process with two simulated clusters
streaming over gRPC, and a headless Chromium."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from playwright.async_api import Browser, async_playwright

from core_agent.simulated.cluster import ClusterSpec, SimulatedCluster
from tests.agents import join
from tests.conftest import ADMIN_TOKEN
from tests.server_process import ServerProcess

CHROMIUM = os.environ.get("VGLOBAL_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SPEC = ClusterSpec.model_validate(
    {
        "nodeGroups": [{"count": 8, "gpusPerNode": 8, "gpuModel": "H100"}],
        "topology": {"tiers": [{"name": "tor", "size": 4}, {"name": "spine", "size": 2}]},
    }
)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    process = ServerProcess(f"sqlite+aiosqlite:///{tmp_path}/console.db", tmp_path, scheduling=True)
    process.start()
    yield process
    process.stop()


@pytest.fixture
async def federation(server: ServerProcess) -> AsyncIterator[httpx.AsyncClient]:
    """Two simulated clusters streaming to the server, linked at 400 Gbps."""
    api = httpx.AsyncClient(
        base_url=server.url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=10
    )
    stop = asyncio.Event()
    tasks = []
    for name in ("east", "west"):
        cluster = SimulatedCluster.from_spec(name, SPEC)
        tasks.append(await join(api, name, cluster, target=server.grpc_target, stop=stop))
    await api.post(
        "/api/v1/links", json={"clusterA": "east", "clusterB": "west", "capacityGbps": 400}
    )
    try:
        yield api
    finally:
        stop.set()
        await asyncio.gather(*tasks)
        await api.aclose()


@pytest.fixture(scope="session")
def chromium() -> str:
    assert Path(CHROMIUM).exists(), f"{CHROMIUM} missing: run scripts/ensure-chromium.sh"
    return CHROMIUM


@pytest.fixture
async def browser(chromium: str) -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        instance = await playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        yield instance
        await instance.close()
