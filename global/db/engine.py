"""Engine and session factory for SQLite (embedded default) and Postgres."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

from sqlalchemy import event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

from volcano_global.db import checkpoints, json_text


def create_engine(
    url: str, *, pool_size: int = 10, background_checkpoints: bool = False
) -> AsyncEngine:
    """`background_checkpoints` (SQLite): a `checkpoints.Checkpointer` copies the log, so this
    engine's connection checkpoints only at its backstop (why: `checkpoints.py`)."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database or ""
        if database and database != ":memory:":
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        # One connection: SQLite has one writer anyway, and a single connection cannot hit
        # SQLITE_BUSY against itself. The busy timeout covers other processes (the CLI).
        engine = create_async_engine(
            url, pool_size=1, max_overflow=0, pool_timeout=60, json_serializer=json_text.dumps
        )
        pragmas = _sqlite_pragmas
        if background_checkpoints:
            pragmas = partial(_sqlite_pragmas, autocheckpoint=checkpoints.BACKSTOP_PAGES)
        event.listen(engine.sync_engine, "connect", pragmas)
        return engine
    if parsed.get_backend_name() != "postgresql":
        raise ValueError(
            f"unsupported database {parsed.get_backend_name()!r}: use sqlite or postgresql"
        )
    # No pre-ping: it costs a round trip on every checkout. A connection found dead when used
    # makes SQLAlchemy drop every pooled connection opened before it (the request that found it
    # gets a 503 and retries), which is how a Postgres restart shows.
    # No overflow: a connection beyond the pool would be closed as soon as it is returned, so
    # under a burst every extra checkout would pay for a new Postgres backend. Past
    # `pool_size`, work waits for a connection (up to the pool timeout, then 503).
    # JSON through orjson as on SQLite (JSONB keeps a canonical form of its own): the standard
    # library's encoder cost more than the statements it fed (docs/benchmarks.md, "Deltas,
    # session 16").
    return create_async_engine(
        url, pool_size=pool_size, max_overflow=0, json_serializer=json_text.dumps
    )


def _sqlite_pragmas(
    dbapi_connection: Any, _record: Any, *, autocheckpoint: int | None = None
) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA synchronous=NORMAL")
    # 64 MiB of pages, not SQLite's 2 MiB: a fleet's nodes are written at random, and each
    # page missing from the cache is read from the OS again (docs/benchmarks.md, "SQLite's
    # checkpoints in a thread of their own").
    cursor.execute("PRAGMA cache_size=-65536")
    if autocheckpoint is not None:
        cursor.execute(f"PRAGMA wal_autocheckpoint={int(autocheckpoint)}")
        cursor.execute(f"PRAGMA journal_size_limit={checkpoints.LOG_SIZE_LIMIT}")
    cursor.close()


def create_session_factory(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return async_sessionmaker(engine, expire_on_commit=False)


@asynccontextmanager
async def transaction(factory: async_sessionmaker[AsyncSession]) -> AsyncIterator[AsyncSession]:
    """A unit of work: commits on success, rolls back on any exception."""
    async with factory() as session, session.begin():
        yield session


async def autocommit(session: AsyncSession) -> AsyncSession:
    """Make a new session run each statement in autocommit on Postgres, without the BEGIN and
    COMMIT round trips. For sessions that only read (at READ COMMITTED every statement sees a
    snapshot of its own inside a transaction too, so they see the same) or whose every write
    is one statement (atomic on its own). SQLite: unchanged."""
    if session.bind is not None and session.bind.dialect.name == "postgresql":
        await session.connection(execution_options={"isolation_level": "AUTOCOMMIT"})
    return session


async def take_write_lock(session: AsyncSession) -> None:
    """SQLite: begin the session's transaction with BEGIN IMMEDIATE, taking the database's
    write lock before its first read. The driver begins a transaction only at the first write,
    so what a transaction read before it (and decided its writes on) is not protected from
    another process writing the file in between. Postgres: nothing (its callers write in one
    statement). Call first thing in the transaction."""
    if session.get_bind().dialect.name == "sqlite":
        await session.execute(_BEGIN_IMMEDIATE)


_BEGIN_IMMEDIATE = text("BEGIN IMMEDIATE")


@asynccontextmanager
async def reading(factory: async_sessionmaker[AsyncSession]) -> AsyncIterator[AsyncSession]:
    """A session that only reads (see `autocommit`)."""
    async with factory() as session:
        yield await autocommit(session)


# SQLSTATEs that mean "try again": connection exceptions (class 08), the server shutting down or
# starting (57P01-57P03), too many connections, serialization failure, deadlock.
_TRANSIENT_SQLSTATES = ("08", "57P01", "57P02", "57P03", "53300", "40001", "40P01")


_MID_OPERATION = "another operation"
# SQLite's primary result code for a statement refused for what it holds (SQLITE_ERROR: too
# many SQL variables, too many terms in compound SELECT, parser stack overflow, expression tree
# too large, no such table or column): the driver raises it as an OperationalError, as it does
# "database is locked" (SQLITE_BUSY), but the same statement fails again however often it is
# retried. "string or blob too big" (SQLITE_TOOBIG) comes as a DataError, never transient.
_SQLITE_ERROR = 1


def is_unavailable(exc: BaseException) -> bool:
    """Whether a database error is transient (the database restarting, unreachable, busy or the
    connection lost mid-statement): the caller should be told to retry, not that we failed."""
    if isinstance(exc, OperationalError):
        return not _refused_statement(exc)
    if isinstance(exc, PoolTimeout | OSError):
        return True
    if not isinstance(exc, DBAPIError):
        return False
    if exc.connection_invalidated:
        return True
    error: BaseException | None = exc.orig
    while error is not None:  # SQLAlchemy's adapter error, then the driver's own
        state = str(getattr(error, "sqlstate", None) or getattr(error, "pgcode", None) or "")
        if state.startswith(_TRANSIENT_SQLSTATES):
            return True
        if type(error).__name__ in ("ConnectionDoesNotExistError", "InterfaceError"):
            return True  # asyncpg: the connection was closed under the statement
        if type(error).__name__ == "InternalClientError" and _MID_OPERATION in str(error):
            # asyncpg: an operation the database's restart cut left the connection mid-way;
            # the pool's reset fails on it and drops it, so a retry gets a sound one.
            return True
        error = error.__cause__
    return False


def _refused_statement(exc: OperationalError) -> bool:
    """Whether SQLite refused the statement itself (`_SQLITE_ERROR`; Python 3.11's sqlite3
    errors carry the extended result code, whose low byte is the primary one)."""
    code = getattr(exc.orig, "sqlite_errorcode", None)
    return isinstance(code, int) and code & 0xFF == _SQLITE_ERROR
