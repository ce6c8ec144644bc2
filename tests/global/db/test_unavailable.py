"""Which database errors are transient (`db.engine.is_unavailable`): the caller retries them
instead of failing (and logging a traceback for) what the database's restart caused; a
statement SQLite refuses for what it holds is not one (retried, it fails again)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from asyncpg.exceptions._base import InternalClientError
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError, InternalError, OperationalError
from sqlalchemy.ext.asyncio import create_async_engine

from tests.sqlite_limits import limit_variables
from volcano_global.db.engine import is_unavailable


def _as_sqlalchemy_raises_it(message: str) -> InternalError:
    driver = InternalClientError(message)
    adapted = RuntimeError(message)  # SQLAlchemy's adapter error, caused by the driver's
    adapted.__cause__ = driver
    return InternalError("BEGIN", {}, adapted)


def test_a_connection_left_mid_operation_by_a_restart_is_transient() -> None:
    left = "cannot switch to state 15; another operation (2) is in progress"
    assert is_unavailable(_as_sqlalchemy_raises_it(left))


def test_another_client_error_is_not() -> None:
    assert not is_unavailable(_as_sqlalchemy_raises_it("unexpected codec state"))


async def _sqlite_error(path: Path, sql: str, params: dict[str, int] | None = None) -> DBAPIError:
    """What SQLAlchemy raises for `sql` on a SQLite database at `path` that takes at most 10
    bind parameters a statement and waits for no lock."""
    engine = create_async_engine(f"sqlite+aiosqlite:///{path}", connect_args={"timeout": 0})
    await limit_variables(engine, 10)
    try:
        async with engine.begin() as connection:
            await connection.execute(text(sql), params or {})
    except DBAPIError as exc:
        return exc
    finally:
        await engine.dispose()
    raise AssertionError(f"{sql[:40]!r} ran")


@pytest.mark.parametrize(
    ("sql", "params", "said"),
    [
        ("SELECT " + ", ".join(f":p{i}" for i in range(11)), {f"p{i}": i for i in range(11)},
         "too many SQL variables"),
        (" UNION ALL ".join(["SELECT 1"] * 501), None, "too many terms in compound SELECT"),
        ("SELECT " + "(" * 1200 + "1" + ")" * 1200, None, "parser stack overflow"),
        ("SELECT zeroblob(2000000000)", None, "string or blob too big"),
    ],
    ids=["variables", "compound", "parser-stack", "blob"],
)  # fmt: skip
async def test_a_statement_sqlite_refuses_for_what_it_holds_is_not_transient(
    tmp_path: Path, sql: str, params: dict[str, int] | None, said: str
) -> None:
    """Retried, the same statement fails again: the caller (a batch of inventory deltas, a
    REST request) is told it failed, not to retry."""
    error = await _sqlite_error(tmp_path / "db.sqlite", sql, params)
    assert said in str(error.orig)
    assert not is_unavailable(error)


async def test_a_locked_sqlite_database_is_transient(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x INTEGER)")
    holder.execute("BEGIN IMMEDIATE")
    try:
        error = await _sqlite_error(path, "INSERT INTO t VALUES (1)")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert isinstance(error, OperationalError)
    assert "database is locked" in str(error.orig)
    assert is_unavailable(error)
