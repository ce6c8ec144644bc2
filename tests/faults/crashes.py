"""A Global process driven to a failpoint, and its jobs watched over REST across the crash."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

from tests.server_process import ServerProcess


async def until(api: httpx.AsyncClient, uid: str, check: Any, within: float = 60.0) -> dict:
    """The job once `check(job)` holds; the Global may be down in between (polls every 0.1 s)."""
    deadline, job = time.monotonic() + within, {}
    while True:
        try:
            job = (await api.get(f"/api/v1/jobs/{uid}", timeout=5)).json()
            if check(job):
                return dict(job)
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, f"not reached: {job}"
        await asyncio.sleep(0.1)


async def crashed_at(server: ServerProcess, point: str, within: float = 60.0) -> None:
    """Wait for the process to die at failpoint `point` (its VGLOBAL_FAILPOINTS)."""
    deadline = time.monotonic() + within
    while server.proc is not None and server.proc.poll() is None:
        assert time.monotonic() < deadline, "the failpoint was not reached"
        await asyncio.sleep(0.1)
    assert f"FAILPOINT {point}" in server.log.read_text()
