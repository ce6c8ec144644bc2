"""A heartbeat whose cluster row another transaction holds (Postgres: row locks; SQLite has
one writer): written by the next write, without holding the other clusters' heartbeats."""

from __future__ import annotations

import asyncio

import pytest
from fastapi import FastAPI
from sqlalchemy import text

from tests.heartbeat_support import heard, register_ready
from volcano_global.services.inventory.heartbeat_writer import HeartbeatWriter


@pytest.fixture
def database_url(postgres_url: str) -> str:
    """Postgres only: see the module's docstring."""
    from tests.conftest import empty_postgres

    asyncio.run(empty_postgres(postgres_url))
    return postgres_url


async def test_a_row_held_elsewhere_is_written_next_time(app: FastAPI) -> None:
    ids = await register_ready(app, "east", "west")
    writer = HeartbeatWriter(app.state.sessions, delay_s=60, stale_s=30)
    async with app.state.engine.connect() as holder:
        await holder.execute(text("SELECT 1 FROM clusters WHERE name = 'east' FOR UPDATE"))
        writer.note(ids["east"], "east")
        writer.note(ids["west"], "west")
        await asyncio.wait_for(writer._write(), timeout=10)  # not waiting on east's row
        seen = await heard(app)
        assert seen["east"][1] is None and seen["west"][1] is not None
        await holder.rollback()
    await writer.close()
    assert (await heard(app))["east"][1] is not None
