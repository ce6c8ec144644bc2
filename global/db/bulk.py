"""Many rows in one statement. On Postgres the rows travel as one JSON parameter unpacked by
`jsonb_to_recordset`: one statement, one parameter and one round trip whatever the number of
rows, and SQL text that does not change with it (prepared once per connection). An executemany
costs SQLAlchemy a parameter set per row, each processed in Python: a large part of what an
agent's inventory delta cost. Elsewhere (SQLite, the embedded default) the
same rows go as an executemany; the outcome is the same."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel
from sqlalchemy import Executable, Table, bindparam, text, update
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql.asyncpg import PGDialect_asyncpg
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import BindParameter, TextClause

from volcano_global.db.types import stored_form

T = TypeVar("T")
Names = tuple[str, ...]  # column names
_PG = postgresql.dialect()
_ASYNCPG = PGDialect_asyncpg()
_STATEMENTS: dict[tuple[Any, ...], Any] = {}  # built once: building costs more than running


async def update_rows(
    session: AsyncSession,
    table: Table,
    rows: Sequence[dict[str, Any]],
    *,
    key: str,
    where: dict[str, Any],
    values: dict[str, Any],
) -> None:
    """In the rows of `table` matching `where` (column: value), set each given row's columns in
    the row whose `key` column equals its `key` (every row gives the same columns), and the
    `values` (column: value) in all of them."""
    if not rows:
        return
    columns = tuple(rows[0])
    constants = {f"w_{c}": v for c, v in where.items()} | {f"c_{c}": v for c, v in values.items()}
    shape = (table.name, columns, key, tuple(where), tuple(values))
    if _dialect(session) == "postgresql":
        statement = cached_statement(("update", *shape), _pg_update, table, *shape[1:])
        await session.execute(statement, {"rows": as_json(rows), **constants})
        return
    statement = cached_statement(("update sqlite", *shape), _update, table, *shape[1:])
    await session.execute(
        statement, [{f"v_{c}": v for c, v in row.items()} | constants for row in rows]
    )


async def add_to_rows(
    session: AsyncSession,
    table: Table,
    rows: Sequence[dict[str, Any]],
    *,
    keys: Names,
    added: Names,
) -> None:
    """Insert the rows; where a row with the same `keys` exists, add the `added` columns to
    it instead. Give the rows in key order (concurrent writers then lock in the same order)."""
    if not rows:
        return
    columns = tuple(rows[0])
    if _dialect(session) == "postgresql":
        key = ("add", table.name, columns, keys, added)
        statement = cached_statement(key, _pg_add, table, columns, keys, added)
        await session.execute(statement, {"rows": as_json(rows)})
        return
    statement = cached_statement(("add sqlite", table.name, keys, added), _add, table, keys, added)
    await session.execute(statement, list(rows))


def _pg_update(table: Table, columns: Names, key: str, where: Names, values: Names) -> TextClause:
    sets = [f"{c} = u.{c}" for c in columns if c != key] + [f"{c} = :c_{c}" for c in values]
    matches = [f"t.{key} = u.{key}"] + [f"t.{c} = :w_{c}" for c in where]
    return text(
        # Table and column names come from the model, never from input.
        f"UPDATE {table.name} AS t SET {', '.join(sets)} "
        f"FROM jsonb_to_recordset(CAST(:rows AS jsonb)) AS u({record_of(table, columns)}) "
        f"WHERE {' AND '.join(matches)}"
    ).bindparams(*_typed(table, "w_", where), *_typed(table, "c_", values))


def _pg_add(table: Table, columns: Names, keys: Names, added: Names) -> TextClause:
    names = ", ".join(columns)
    sets = ", ".join(f"{c} = t.{c} + excluded.{c}" for c in added)
    return text(
        f"INSERT INTO {table.name} AS t ({names}) SELECT {names} "
        f"FROM jsonb_to_recordset(CAST(:rows AS jsonb)) AS u({record_of(table, columns)}) "
        f"ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {sets}"
    )


def _update(table: Table, columns: Names, key: str, where: Names, values: Names) -> Executable:
    sets = {c: bindparam(f"v_{c}") for c in columns if c != key}
    sets |= {c: bindparam(f"c_{c}") for c in values}
    matches = [table.c[key] == bindparam(f"v_{key}")]
    matches += [table.c[c] == bindparam(f"w_{c}") for c in where]
    return update(table).where(*matches).values(sets)


def _add(table: Table, keys: Names, added: Names) -> Executable:
    insert = sqlite_insert(table)
    return insert.on_conflict_do_update(
        index_elements=list(keys), set_={c: table.c[c] + insert.excluded[c] for c in added}
    )


def _typed(table: Table, prefix: str, columns: Names) -> list[BindParameter[Any]]:
    """Parameters for constants, typed as their columns (so they are converted as stored)."""
    return [bindparam(f"{prefix}{c}", type_=table.c[c].type) for c in columns]


def record_of(table: Table, columns: Names) -> str:
    """The record definition `jsonb_to_recordset` needs for rows of `table` (as `as_json`
    sends them): each column with its Postgres type."""
    return ", ".join(f"{c} {table.c[c].type.compile(dialect=_PG)}" for c in columns)


def as_json(rows: Sequence[dict[str, Any]]) -> str:
    """Rows as one JSON parameter: UUIDs and timestamps (RFC 3339) as text, which Postgres
    casts back to the column types; enums as their values; models in their stored form.
    orjson, because these rows are on the inventory delta's hot path."""
    return orjson.dumps(rows, default=_encoded).decode()


def _encoded(value: Any) -> Any:
    """What orjson does not encode itself: a model as its column stores it (db/types.py),
    anything else (UUIDs, Decimals) as text."""
    return stored_form(value) if isinstance(value, BaseModel) else str(value)


def cached_statement(key: tuple[Any, ...], build: Callable[..., T], *args: Any) -> T:
    """`build(*args)`, built once per `key` (the statement's shape)."""
    statement = _STATEMENTS.get(key)
    if statement is None:
        statement = _STATEMENTS[key] = build(*args)
    return statement  # type: ignore[no-any-return]


async def postgres_rows(
    connection: AsyncConnection, statement: TextClause, params: dict[str, str]
) -> Sequence[Sequence[Any]]:
    """Postgres: the rows of `statement`, one statement whose parameters are all text (e.g.
    `as_json`'s rows), run straight on the connection's asyncpg connection, outside a
    transaction (atomic on its own). SQLAlchemy's greenlet, cursor and result layers cost more
    CPU than the driver (docs/benchmarks.md, "Server cost: dated runs"), and text parameters
    and untyped columns need none of its type processing, so the rows are the same. A driver
    error runs the statement again through SQLAlchemy, in a transaction, which raises its own
    exception for it (IntegrityError, a lost connection) and invalidates a dead connection. An
    error the server reported wrote nothing; one raised in the client after the server
    committed (decoding the rows: unlikely with text and uuid columns) would run it again, and
    the writer's ON CONFLICT would then take its rows for someone else's. A connection whose
    statement was cancelled is dropped (the driver may still be busy with it)."""
    sql, names = cached_statement(("positional", statement), _positional, statement)
    driver = (await connection.get_raw_connection()).driver_connection
    try:
        return await driver.fetch(sql, *(params[name] for name in names))  # type: ignore[no-any-return]
    except Exception:
        async with connection.begin():
            return list(await connection.execute(statement, params))
    except BaseException:  # cancelled mid-statement: dropped, as SQLAlchemy drops it then
        await connection.invalidate()
        raise


def _positional(statement: TextClause) -> tuple[str, tuple[str, ...]]:
    """The statement's Postgres SQL with $1, $2... and its parameters' names in that order."""
    compiled = statement.compile(dialect=_ASYNCPG)
    assert isinstance(compiled, SQLCompiler)
    return compiled.string, tuple(compiled.positiontup or ())


def _dialect(session: AsyncSession) -> str:
    return session.get_bind().dialect.name
