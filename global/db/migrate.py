"""Run the alembic chain from code: on server start (under a Postgres advisory lock so that
replicas starting together migrate once) and from tests."""

from __future__ import annotations

import functools
import logging
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, text
from sqlalchemy.ext.asyncio import AsyncEngine

import volcano_global.migrations as migrations_package

log = logging.getLogger(__name__)

# pg_advisory_xact_lock key shared by every replica ("vglo" in ASCII).
MIGRATION_LOCK_KEY = 0x76676C6F


def alembic_config(url: str | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(Path(migrations_package.__file__).parent))
    if url:
        cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


@functools.cache
def head_revisions() -> frozenset[str]:
    """The chain's heads: the migration files do not change while the process runs."""
    return frozenset(ScriptDirectory.from_config(alembic_config()).get_heads())


async def upgrade(engine: AsyncEngine, revision: str = "head") -> None:
    """Migrate to `revision`, saying it in one line (the server shows alembic's own, about
    100 on an empty database, only at DEBUG: `cli/serve.py`).

    A database already at the head is left alone without alembic (which reads every migration
    file) and without the advisory lock: a replica migrating holds the old revision until its
    transaction commits, so a reader that sees the head has nothing left to wait for."""
    if revision == "head" and await _stored_revisions(engine) == head_revisions():
        return
    before = await current_revision(engine)
    await _run(engine, lambda cfg: command.upgrade(cfg, revision))
    after = await current_revision(engine)
    if after != before:
        log.info("database schema migrated from %s to %s", before or "an empty database", after)


async def downgrade(engine: AsyncEngine, revision: str) -> None:
    await _run(engine, lambda cfg: command.downgrade(cfg, revision))


async def current_revision(engine: AsyncEngine) -> str | None:
    return next(iter(sorted(await _stored_revisions(engine))), None)


async def _stored_revisions(engine: AsyncEngine) -> frozenset[str]:
    """The revisions stored in `alembic_version` (none on an empty database)."""
    async with engine.connect() as conn:
        has_table = await conn.run_sync(
            lambda sync: sync.dialect.has_table(sync, "alembic_version")
        )
        if not has_table:
            return frozenset()
        rows = await conn.execute(text("SELECT version_num FROM alembic_version"))
        return frozenset(rows.scalars())


async def _run(engine: AsyncEngine, action) -> None:  # type: ignore[no-untyped-def]
    async with engine.connect() as conn:
        if engine.dialect.name == "sqlite":
            # Batch migrations copy tables; with foreign keys on, dropping the old table would
            # cascade deletes. The pragma only takes effect outside a transaction.
            await conn.exec_driver_sql("PRAGMA foreign_keys=OFF")
            await conn.commit()
        else:
            await conn.execute(
                text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY}
            )

        def run(sync_conn: Connection) -> None:
            cfg = alembic_config()
            cfg.attributes["connection"] = sync_conn
            action(cfg)

        try:
            await conn.run_sync(run)
            await conn.commit()
        finally:
            if engine.dialect.name == "sqlite":
                await conn.rollback()
                await conn.exec_driver_sql("PRAGMA foreign_keys=ON")
                await conn.commit()
