"""The database tests' shared fixtures."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.conftest import create_postgres_database, drop_postgres_database
from volcano_global.db.engine import create_engine


@pytest.fixture(params=["sqlite", "postgres"])
async def empty_engine(
    request: pytest.FixtureRequest, tmp_path: Path, fresh_database_name: str
) -> AsyncIterator[AsyncEngine]:
    if request.param == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path}/m.db"
    else:
        url = await create_postgres_database(fresh_database_name)
    engine = create_engine(url)
    yield engine
    await engine.dispose()
    if request.param == "postgres":
        await drop_postgres_database(fresh_database_name)
