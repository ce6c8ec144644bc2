"""The alembic chain upgrades and downgrades on both databases and matches the models."""

from __future__ import annotations

import asyncio
from pathlib import Path

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from tests.conftest import create_postgres_database, drop_postgres_database
from volcano_global.db import migrate
from volcano_global.db.base import Base
from volcano_global.db.engine import create_engine
from volcano_global.db.models import NODES_FILLFACTOR

HEAD = ScriptDirectory.from_config(migrate.alembic_config()).get_current_head()


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


def _partial_indexes(conn: sa.Connection) -> dict[tuple[str, str], str]:
    """(table, index) -> the index's WHERE, as the database reports it."""
    found = {}
    for table in inspect(conn).get_table_names():
        for index in inspect(conn).get_indexes(table):
            where = index.get("dialect_options", {}).get(f"{conn.dialect.name}_where")
            if where is not None:
                found[(table, str(index["name"]))] = str(where)
    return found


async def test_partial_indexes_match_the_models(
    empty_engine: AsyncEngine, tmp_path: Path, fresh_database_name: str
) -> None:
    """compare_metadata does not compare an index's WHERE: the migrated one must read as the
    one the models create."""
    postgres = empty_engine.dialect.name == "postgresql"
    model_name = f"{fresh_database_name}_models"
    if postgres:
        models = create_engine(await create_postgres_database(model_name))
    else:
        models = create_engine(f"sqlite+aiosqlite:///{tmp_path}/models.db")
    try:
        async with models.begin() as conn:
            await conn.run_sync(Base.metadata.create_all)
            expected = await conn.run_sync(_partial_indexes)
        await migrate.upgrade(empty_engine)
        async with empty_engine.connect() as conn:
            assert await conn.run_sync(_partial_indexes) == expected
        assert ("placements", "ix_placements_holding_state") in expected
    finally:
        await models.dispose()
        if postgres:
            await drop_postgres_database(model_name)


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


async def _a_lock_waits(conn: AsyncConnection) -> bool:
    """Whether a session comes to wait on an advisory lock within 60 s."""
    query = sa.text("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")
    for _ in range(1200):
        if (await conn.execute(query)).scalar_one():
            return True
        await asyncio.sleep(0.05)
    return False


async def test_postgres_a_start_at_the_head_does_not_wait_for_a_migrating_replica(
    fresh_database_name: str,
) -> None:
    """A replica whose database is at the head starts while another holds the migration lock;
    one whose database is behind waits for the lock, then migrates."""
    url = await create_postgres_database(fresh_database_name)
    holder, starter = create_engine(url), create_engine(url)
    try:
        await migrate.upgrade(starter)
        assert migrate.head_revisions() == {HEAD}
        async with holder.connect() as conn:
            lock = sa.text("SELECT pg_advisory_xact_lock(:key)")
            await conn.execute(lock, {"key": migrate.MIGRATION_LOCK_KEY})
            await asyncio.wait_for(migrate.upgrade(starter), timeout=60)
            await conn.commit()
            await migrate.downgrade(starter, "-1")
            await conn.execute(lock, {"key": migrate.MIGRATION_LOCK_KEY})
            behind = asyncio.create_task(migrate.upgrade(starter))
            assert await _a_lock_waits(conn)
            assert not behind.done()
            await conn.commit()
        await asyncio.wait_for(behind, timeout=60)
        assert await migrate.current_revision(starter) == HEAD
    finally:
        await holder.dispose()
        await starter.dispose()
        await drop_postgres_database(fresh_database_name)


async def test_postgres_nodes_leave_room_on_their_pages(fresh_database_name: str) -> None:
    """The migrated `nodes` fills its pages to the models' fillfactor: a delta's update of a
    node then finds room on its page and, changing no indexed column, writes no index entry."""
    engine = create_engine(await create_postgres_database(fresh_database_name))
    try:
        await migrate.upgrade(engine)
        async with engine.connect() as conn:
            options = await conn.scalar(
                sa.text("SELECT reloptions FROM pg_class WHERE relname = 'nodes'")
            )
        assert options == [f"fillfactor={NODES_FILLFACTOR}"]
    finally:
        await engine.dispose()
        await drop_postgres_database(fresh_database_name)


async def test_postgres_node_change_log_is_json_compressed_with_lz4(
    fresh_database_name: str,
) -> None:
    """The log's rows are written once and read whole: json (no JSONB parse) and lz4 where the
    server has it (this one has: Debian builds it in)."""
    url = await create_postgres_database(fresh_database_name)
    engine = create_engine(url)
    try:
        await migrate.upgrade(engine)
        async with engine.begin() as conn:
            column = sa.text(
                "SELECT atttypid::regtype::text, attcompression::text FROM pg_attribute "
                "WHERE attrelid = 'node_changes'::regclass AND attname = 'nodes'"
            )
            assert (await conn.execute(column)).one() == ("json", "l")
    finally:
        await engine.dispose()
        await drop_postgres_database(fresh_database_name)
