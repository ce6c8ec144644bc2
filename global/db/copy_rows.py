"""Inserting many rows given as tuples or as columns, in the driver's own terms: on Postgres one
INSERT of `unnest` over one array parameter per column (asyncpg encodes the arrays in C; values
the same in every row are plain parameters, not arrays), on SQLite one
executemany on the driver; both through SQLAlchemy's connection, which translates errors as
for any statement. Each value goes through its column type's bind processing as SQLAlchemy
would apply it, taken once per column (JSON as `json_text` writes it, as the engine's
serializer does on SQLite), instead of SQLAlchemy's per-row parameter handling, which cost
more than the database's own work for an agent's 5,000-node snapshot (docs/benchmarks.md,
"Ingest at 100 x 5,000"). Updating rows on Postgres takes one array of a composite type
instead (`update_tuples`): asyncpg checks each element of an array parameter in Python, so an
array per column costs a check per value, an array of rows one per row.

New primary keys are random (version 4) UUIDs made from one read of the OS's randomness for
the whole batch; building a `uuid.UUID` per row cost as much as the insert (and Postgres'
`gen_random_uuid()` costs its backend 1.6 us a row, ten times what parsing the text does)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import JSON, Enum, String, Table
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.types import TypeEngine

from volcano_global.db import json_text

Names = tuple[str, ...]
Processor = Callable[[Any], Any]
_VARIANT = "89ab"
_PG = postgresql.dialect()


async def insert_tuples(
    session: AsyncSession,
    table: Table,
    columns: Names,
    rows: Sequence[Sequence[Any]],
    *,
    constants: dict[str, Any],
    new_ids: bool = True,
) -> None:
    """Insert a row per tuple of `rows` (values for `columns`, in order), each also with the
    `constants` (column: value) and, with `new_ids`, a new random UUID as its `id`."""
    if rows and not columns:
        raise ValueError("rows without columns: name the columns their values are for")
    if rows:
        given = dict(zip(columns, zip(*rows, strict=True), strict=True))
        await insert_columns(session, table, given, constants=constants, new_ids=new_ids)


async def insert_columns(
    session: AsyncSession,
    table: Table,
    values: dict[str, Sequence[Any]],
    *,
    constants: dict[str, Any],
    new_ids: bool = True,
) -> None:
    """`insert_tuples` given a sequence of values per column (all of one length), a row per
    position: what a caller holding its rows' columns saves building a tuple per row."""
    count = len(next(iter(values.values()), ()))
    if any(len(v) != count for v in values.values()):
        # Postgres' unnest pads shorter arrays with NULLs: rows would be stored half empty.
        lengths = {c: len(v) for c, v in values.items()}
        raise ValueError(f"columns of different lengths: {lengths}")
    if not count:
        return
    connection = await session.connection()
    dialect = connection.dialect
    given = (*values, *constants, *(("id",) if new_ids else ()))
    constants = constants | _defaults(table, given)
    columns = [_processed_column(table, c, v, dialect) for c, v in values.items()]
    fixed = [_stored(table, c, v, dialect) for c, v in constants.items()]
    postgres = dialect.name == "postgresql"
    if new_ids:
        columns.append(uuid_texts(count, dashed=postgres))
    names = (*values, *(("id",) if new_ids else ()), *constants)
    if postgres:
        # One array parameter per column and the constants as plain parameters: one statement
        # whatever the number of rows, its text the same for the same columns (prepared once
        # per connection).
        sql = _pg_insert(table, names[: len(columns)], tuple(constants))
        await connection.exec_driver_sql(sql, (*columns, *fixed))
        return
    marks = ", ".join("?" for _ in names)
    # Table and column names come from the model, never from input.
    sql = f"INSERT INTO {table.name} ({', '.join(names)}) VALUES ({marks})"
    extra = [[v] * count for v in fixed]
    await connection.exec_driver_sql(sql, list(zip(*columns, *extra, strict=True)))


def _processed_column(
    table: Table, column: str, values: Sequence[Any], dialect: Dialect
) -> list[Any]:
    """A column's values through its type's bind processing."""
    process = _processor(table, column, dialect)
    if process is None:
        return list(values)
    return [None if v is None else process(v) for v in values]


async def update_tuples(
    session: AsyncSession,
    table: Table,
    columns: Names,
    rows: Sequence[Sequence[Any]],
    *,
    keys: Names,
    constants: dict[str, Any],
    row_type: str,
) -> None:
    """In the row of `table` whose `keys` columns hold a tuple's values for them, set its
    other `columns` (a tuple per row, values for `columns` in order) and the `constants`
    (column: value): on Postgres one UPDATE from `unnest` of one array of `row_type`, a
    composite type whose attributes are `columns` in order (why: the module's docstring); on
    SQLite one executemany on the driver."""
    if not rows:
        return
    connection = await session.connection()
    dialect = connection.dialect
    records = _processed(table, columns, rows, dialect)
    fixed = [(c, _stored(table, c, v, dialect)) for c, v in constants.items()]
    changed = [c for c in columns if c not in keys]
    # Table, column and type names come from the code, never from input.
    if dialect.name == "postgresql":
        sets = [f"{c} = u.{c}" for c in changed]
        sets += [f"{c} = ${n}" for n, (c, _) in enumerate(fixed, 2)]
        matches = " AND ".join(f"t.{k} = u.{k}" for k in keys)
        sql = (
            f"UPDATE {table.name} AS t SET {', '.join(sets)} "
            f"FROM unnest($1::{row_type}[]) AS u WHERE {matches}"
        )
        await connection.exec_driver_sql(sql, (records, *(v for _, v in fixed)))
        return
    sets = [f"{c} = ?" for c in changed] + [f"{c} = ?" for c, _ in fixed]
    matches = " AND ".join(f"{k} = ?" for k in keys)
    sql = f"UPDATE {table.name} SET {', '.join(sets)} WHERE {matches}"
    at = {c: i for i, c in enumerate(columns)}
    order = [at[c] for c in changed]
    key_order = [at[k] for k in keys]
    constant_values = tuple(v for _, v in fixed)
    await connection.exec_driver_sql(
        sql,
        [(*(r[i] for i in order), *constant_values, *(r[i] for i in key_order)) for r in records],
    )


def _processed(
    table: Table, columns: Names, rows: Sequence[Sequence[Any]], dialect: Dialect
) -> list[tuple[Any, ...]]:
    """The rows as tuples (asyncpg takes a list as an array, a tuple as a record), each value
    through its column's bind processing (taken once per column). Processed a column at a
    time and put back together by `zip`: a Python loop over each row's values cost a delta's
    UPDATE more than asyncpg's encoding (docs/benchmarks.md, "Deltas, session 12")."""
    processors = [(i, _processor(table, c, dialect)) for i, c in enumerate(columns)]
    processors = [(i, p) for i, p in processors if p is not None]
    if not processors or not rows:
        return [tuple(row) for row in rows]
    values: list[Sequence[Any]] = list(zip(*rows, strict=True))
    for i, process in processors:
        values[i] = [None if v is None else process(v) for v in values[i]]
    return list(zip(*values, strict=True))


def _pg_insert(table: Table, columns: Names, constants: Names) -> str:
    arrays = ", ".join(f"${i}::{_array_type(table.c[c].type)}[]" for i, c in enumerate(columns, 1))
    start = len(columns) + 1
    scalars = [f"${i}::{_array_type(table.c[c].type)}" for i, c in enumerate(constants, start)]
    names = ", ".join((*columns, *constants))
    selected = ", ".join(["u.*", *scalars])
    return f"INSERT INTO {table.name} ({names}) SELECT {selected} FROM unnest({arrays}) AS u"


def _array_type(column_type: TypeEngine[Any]) -> str:
    """A column's element type for an array parameter. A bounded string goes as text: an
    explicit cast to VARCHAR(n) would cut a longer value silently, while the insert's own
    assignment to the column refuses it."""
    if isinstance(column_type, String) and not isinstance(column_type, Enum):
        return "text"
    return str(column_type.compile(dialect=_PG))


def _defaults(table: Table, given: Names) -> dict[str, Any]:
    """The scalar defaults of the columns not given (SQLAlchemy applies them in Python, so a
    statement in the driver's terms must say them)."""
    return {
        c.name: c.default.arg  # type: ignore[union-attr]
        for c in table.columns
        if c.name not in given and c.default is not None and c.default.is_scalar
    }


def uuid_texts(count: int, *, dashed: bool) -> list[str]:
    """`count` random version-4 UUIDs as text: 32 hex digits, or in the dashed form."""
    hexes = os.urandom(16 * count).hex()
    out = []
    for start in range(0, 32 * count, 32):
        h = hexes[start : start + 32]
        variant = _VARIANT[int(h[16], 16) & 3]
        if dashed:
            out.append(f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{variant}{h[17:20]}-{h[20:]}")
        else:
            out.append(f"{h[:12]}4{h[13:16]}{variant}{h[17:]}")
    return out


def _processor(table: Table, column: str, dialect: Dialect) -> Processor | None:
    type_ = table.c[column].type
    if isinstance(type_, JSON) or isinstance(type_.dialect_impl(dialect), JSON):
        return json_text.dumps
    return type_.dialect_impl(dialect).bind_processor(dialect)  # type: ignore[no-any-return]


def _stored(table: Table, column: str, value: Any, dialect: Dialect) -> Any:
    process = _processor(table, column, dialect)
    return value if process is None or value is None else process(value)
