"""Fixtures of the Global's tests: a real `vglobal server` process on each database."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import create_postgres_database, drop_postgres_database
from tests.server_process import ServerProcess


@pytest.fixture(params=["sqlite", "postgres"])
def server(
    request: pytest.FixtureRequest, tmp_path: Path, fresh_database_name: str
) -> Iterator[ServerProcess]:
    import asyncio

    if request.param == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path}/server.db"
    else:
        url = asyncio.run(create_postgres_database(fresh_database_name))
    process = ServerProcess(url, tmp_path)
    process.start()
    yield process
    process.stop()
    if request.param == "postgres":
        asyncio.run(drop_postgres_database(fresh_database_name))
