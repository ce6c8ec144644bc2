"""For benches that run the Global in their own process: the app started (no scheduling loop, the
agent port on any free port) with an admin client over ASGI, the p50/p95 of a repeated step, and
the command line of a bench over N jobs on a database."""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TypeVar

import httpx
from fastapi import FastAPI

from volcano_global.app import create_app
from volcano_global.settings import Settings

T = TypeVar("T")


@asynccontextmanager
async def started_app(url: str, token: str) -> AsyncIterator[FastAPI]:
    """The app on the database at `url` (migrated), `token` its admin token, until the block
    ends."""
    settings = Settings(
        database_url=url, admin_token=token, grpc_port=0, scheduling={"enabled": False}
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        yield app


def admin_client(app: FastAPI, token: str) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app)
    headers = {"Authorization": f"Bearer {token}"}
    return httpx.AsyncClient(transport=transport, base_url="http://bench", headers=headers)


async def timed(runs: int, step: Callable[[int], Awaitable[T]]) -> tuple[float, float, T | None]:
    """p50 and p95 (ms) of `runs` runs of `step(i)`, and the last run's result."""
    times, result = [], None
    for i in range(runs):
        started = time.perf_counter()
        result = await step(i)
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return statistics.median(times), times[int(0.95 * (len(times) - 1))], result


def run_on_database(main: Callable[[str, int, int], Awaitable[None]], description: str) -> None:
    """`main(url, jobs, runs)` from the command line: `--database-url` (default: a fresh SQLite
    file), `--jobs` (10,000), `--runs` (10)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--database-url", default=None, help="default: a fresh SQLite file")
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = args.database_url or f"sqlite+aiosqlite:///{tmp}/bench.db"
        asyncio.run(main(url, args.jobs, args.runs))  # type: ignore[arg-type]
