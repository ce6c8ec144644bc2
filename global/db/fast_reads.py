"""Hot reads on the driver's own connection. A `Read` is a SELECT built with SQLAlchemy Core
and compiled once; on Postgres it runs straight on the session's asyncpg connection, the
parameters and the values going through the same type processing SQLAlchemy would apply; on
SQLite, the embedded default, SQLAlchemy runs it. Either way the rows come back as dicts with
the same keys and the same Python values.

Why: SQLAlchemy's greenlet, cursor and result layers cost more CPU per statement than the
driver itself, more than the rest of a job read together (docs/benchmarks.md, "Server
cost: dated runs"). The reads served most (a job, a page of jobs, the nodes an inventory
delta names) run here; everything that writes keeps the ORM.

A driver error is not translated here: the statement is run again through SQLAlchemy, which
raises its own exception for it (the API answers 503 for a lost connection) and, for a dead
connection, invalidates the pool as for any other statement."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy import Float, Numeric, Select
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.types import TypeEngine

Row = dict[str, Any]
Processor = Callable[[Any], Any]


class Read:
    """`statement` on every database, or `postgres` instead on Postgres when given: the same
    columns, e.g. `= ANY(:names)` with an array for an `IN` list, whose SQL (prepared once per
    connection) does not change with the number of values and needs no expanding."""

    def __init__(self, statement: Select[Any], *, postgres: Select[Any] | None = None) -> None:
        self.statement = statement
        self.postgres = statement if postgres is None else postgres
        self.keys = list(statement.selected_columns.keys())  # SQLAlchemy's: a name taken gets _1
        if list(self.postgres.selected_columns.keys()) != self.keys:
            raise ValueError("the Postgres form must select the same columns")
        self._compiled: tuple[Dialect, _Compiled] | None = None

    async def rows(self, session: AsyncSession, params: Mapping[str, Any]) -> list[Row]:
        connection = await session.connection()
        if connection.dialect.name != "postgresql":
            return await self._through_sqlalchemy(connection, params)
        compiled = self._compiled_for(connection.dialect)
        records = await self._fetch(connection, compiled, params)
        if records is None:  # SQLAlchemy raises (and handles) the driver's error in its terms
            return await self._through_sqlalchemy(connection, params, self.postgres)
        return [compiled.row(record) for record in records]

    async def records(
        self, session: AsyncSession, params: Mapping[str, Any]
    ) -> Sequence[Mapping[str, Any]]:
        """The rows as `rows` reads them, for a caller that only reads values by key: on
        Postgres the driver's own records when they already hold what `rows` would (no value
        to convert, the same keys), without a dict built per row (for the hottest reads: the
        delta writer's of the nodes a delta names, docs/benchmarks.md "Deltas, session 16")."""
        connection = await session.connection()
        if connection.dialect.name != "postgresql":
            return await self._through_sqlalchemy(connection, params)
        compiled = self._compiled_for(connection.dialect)
        if compiled.columns:
            return await self.rows(session, params)
        records = await self._fetch(connection, compiled, params)
        if records is None:
            return await self._through_sqlalchemy(connection, params, self.postgres)
        if records and list(records[0].keys()) != compiled.keys:
            return [compiled.row(record) for record in records]
        return records

    async def one_or_none(self, session: AsyncSession, params: Mapping[str, Any]) -> Row | None:
        rows = await self.rows(session, params)
        if len(rows) > 1:
            raise ValueError(f"expected at most one row, got {len(rows)}")
        return rows[0] if rows else None

    @staticmethod
    async def _fetch(
        connection: AsyncConnection, compiled: _Compiled, params: Mapping[str, Any]
    ) -> list[Any] | None:
        """The driver's records; None if the driver raised (the caller runs the statement
        again through SQLAlchemy)."""
        sql, args = compiled.arguments(params)
        driver = (await connection.get_raw_connection()).driver_connection
        try:
            return await driver.fetch(sql, *args)
        except Exception:
            return None

    async def _through_sqlalchemy(
        self,
        connection: AsyncConnection,
        params: Mapping[str, Any],
        statement: Select[Any] | None = None,
    ) -> list[Row]:
        result = await connection.execute(
            self.statement if statement is None else statement, dict(params)
        )
        return [dict(zip(self.keys, row, strict=True)) for row in result]

    def _compiled_for(self, dialect: Dialect) -> _Compiled:
        if self._compiled is None or self._compiled[0] is not dialect:
            self._compiled = (dialect, _Compiled(self.postgres, self.keys, dialect))
        return self._compiled[1]


class _Compiled:
    """The statement's SQL for one dialect and the type processing of its parameters and
    columns (what SQLAlchemy's execution applies, taken from the same types)."""

    def __init__(self, statement: Select[Any], keys: list[str], dialect: Dialect) -> None:
        compiled = statement.compile(dialect=dialect)
        assert isinstance(compiled, SQLCompiler)
        self.compiled = compiled
        self.expanding = bool(compiled.post_compile_params)
        self.binds: dict[str, Processor] = {}
        for name, bind in compiled.binds.items():
            process = bind.type.dialect_impl(dialect).bind_processor(dialect)
            if process is not None:
                self.binds[name] = process
        self.keys = keys
        self.columns: list[tuple[int, Processor]] = []
        for index, column in enumerate(statement.selected_columns):
            impl = column.type.dialect_impl(dialect)
            process = impl.result_processor(dialect, _type_code(impl))
            if process is not None:
                self.columns.append((index, process))

    def arguments(self, params: Mapping[str, Any]) -> tuple[str, list[Any]]:
        if self.expanding:
            state = self.compiled.construct_expanded_state(dict(params))
            sql, names, values = state.statement, state.positiontup or [], state.parameters
            processors: Mapping[str, Processor] = {**self.binds, **state.processors}
        else:
            values = self.compiled.construct_params(dict(params))
            sql, names, processors = (
                self.compiled.string,
                self.compiled.positiontup or [],
                self.binds,
            )
        args = []
        for name in names:
            value = values[name]
            process = processors.get(name)
            args.append(value if process is None or value is None else process(value))
        return sql, args

    def row(self, record: Any) -> Row:
        if not self.columns:  # most reads: no value to convert
            return dict(zip(self.keys, record, strict=True))
        values = list(record)
        for index, process in self.columns:
            values[index] = process(values[index])
        return dict(zip(self.keys, values, strict=True))


# The driver's type codes (Postgres type OIDs) SQLAlchemy's numeric result processing asks
# for: it converts a NUMERIC to float for a Float column and leaves a double as it comes.
_FLOAT8, _NUMERIC = 701, 1700


def _type_code(type_: TypeEngine[Any]) -> int | None:
    if isinstance(type_, Float):
        return _FLOAT8
    if isinstance(type_, Numeric):
        return _NUMERIC
    return None
