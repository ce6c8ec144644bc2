"""SQLite's limit on a statement's bind parameters, set on an engine's connections: what a
stock build takes (32,766; Debian's, these tests' own, takes 250,000), or fewer, to make a
statement SQLite refuses for what it holds ('too many SQL variables')."""

from __future__ import annotations

import sqlite3
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.util.concurrency import await_

STOCK_VARIABLES = 32_766


async def limit_variables(engine: AsyncEngine, variables: int = STOCK_VARIABLES) -> None:
    """Every connection the engine opens from now on (those open are closed) takes at most
    `variables` bind parameters a statement. Not SQLite: nothing."""
    if engine.dialect.name != "sqlite":
        return

    def limited(dbapi_connection: Any, _record: Any) -> None:
        aio = dbapi_connection.driver_connection
        await_(aio._execute(aio._conn.setlimit, sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, variables))

    event.listen(engine.sync_engine, "connect", limited)
    await engine.dispose()
