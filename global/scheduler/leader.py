"""Leader election through a Postgres session-level advisory lock, held on a dedicated
connection for as long as this replica leads. On SQLite (one replica) this replica leads."""

from __future__ import annotations

import contextlib
import logging

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

log = logging.getLogger(__name__)

SCHEDULER_LOCK_KEY = 0x76677363  # "vgsc"


class Leadership:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._connection: AsyncConnection | None = None

    @property
    def leading(self) -> bool:
        return self.engine.dialect.name != "postgresql" or self._connection is not None

    async def acquire(self) -> bool:
        """True when this replica leads (now or already)."""
        if self.engine.dialect.name != "postgresql":
            return True
        if self._connection is not None:
            try:
                await self._connection.execute(text("SELECT 1"))
                return True
            except Exception:  # the connection (and with it the lock) is gone
                log.warning("lost the scheduler lock's connection; no longer leading")
                await self.release()
        # The lock is the session's, not a transaction's: in autocommit, no transaction is left
        # open for as long as this replica leads (a long-transaction alert, the vacuum horizon
        # held back, an `idle_in_transaction_session_timeout` ending the session and the lock).
        connection = await self.engine.connect()
        try:
            await connection.execution_options(isolation_level="AUTOCOMMIT")
            got = (
                await connection.execute(
                    text("SELECT pg_try_advisory_lock(:k)"), {"k": SCHEDULER_LOCK_KEY}
                )
            ).scalar()
        except BaseException:  # a database going away mid-way: the connection back, not lost
            await connection.close()
            raise
        if got:
            self._connection = connection
            log.info("this replica leads the scheduler")
            return True
        await connection.close()
        return False

    async def release(self) -> None:
        """Give the lock up. A connection the unlock failed on is discarded, not pooled: it may
        still hold the lock, and back in the pool it would keep every replica from leading."""
        connection, self._connection = self._connection, None
        if connection is None:
            return
        try:
            await connection.execute(
                text("SELECT pg_advisory_unlock(:k)"), {"k": SCHEDULER_LOCK_KEY}
            )
        except Exception:
            with contextlib.suppress(Exception):
                await connection.invalidate()
        await connection.close()
