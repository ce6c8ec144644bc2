"""The alembic chain upgrades and downgrades on both databases and matches the models."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.conftest import create_postgres_database, drop_postgres_database
from volcano_global.db import migrate
from volcano_global.db.base import Base
from volcano_global.db.engine import create_engine

HEAD = ScriptDirectory.from_config(migrate.alembic_config()).get_current_head()


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


async def _tables(engine: AsyncEngine) -> set[str]:
    async with engine.connect() as conn:
        return set(await conn.run_sync(lambda c: inspect(c).get_table_names()))


async def test_upgrade_downgrade_upgrade(empty_engine: AsyncEngine) -> None:
    expected = {t.name for t in Base.metadata.sorted_tables}
    await migrate.upgrade(empty_engine)
    assert expected <= await _tables(empty_engine)
    assert await migrate.current_revision(empty_engine) == HEAD
    await migrate.downgrade(empty_engine, "base")
    assert await _tables(empty_engine) == {"alembic_version"}
    assert await migrate.current_revision(empty_engine) is None
    await migrate.upgrade(empty_engine)
    assert expected <= await _tables(empty_engine)


async def test_models_match_the_migrations(empty_engine: AsyncEngine) -> None:
    await migrate.upgrade(empty_engine)
    async with empty_engine.connect() as conn:
        diff = await conn.run_sync(
            lambda c: compare_metadata(
                MigrationContext.configure(c, opts={"compare_type": True}), Base.metadata
            )
        )
    assert diff == []


async def test_postgres_replicas_starting_together_migrate_once(fresh_database_name: str) -> None:
    """Several replicas share one Postgres; the advisory lock makes them migrate one at a time.
    (SQLite is the single-replica embedded default, so it has no such case.)"""
    url = await create_postgres_database(fresh_database_name)
    engines = [create_engine(url) for _ in range(3)]
    try:
        await asyncio.gather(*(migrate.upgrade(e) for e in engines))
        assert await migrate.current_revision(engines[0]) == HEAD
    finally:
        for engine in engines:
            await engine.dispose()
        await drop_postgres_database(fresh_database_name)
