"""Cross-replica locks through the database (Postgres advisory locks; SQLite has a single
writer, so there is nothing to take)."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

BOOTSTRAP_LOCK_KEY = 0x76676C62  # "vglb"
QUEUE_TREE_LOCK_KEY = 0x76677174  # "vgqt": one change of the queue hierarchy at a time


async def advisory_xact_lock(session: AsyncSession, key: int) -> None:
    """Hold `key` until the current transaction ends."""
    if session.bind.dialect.name == "postgresql":
        await session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})
