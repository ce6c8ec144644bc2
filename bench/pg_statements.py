"""Postgres' own account of a benchmark's statements, from pg_stat_statements: per statement
its calls, the shared buffers it touched (the best proxy for its CPU in Postgres: its
execution time also counts lock waits and waiting for a core) and that time.

The extension must be loaded when Postgres starts (`ALTER SYSTEM SET shared_preload_libraries
= 'pg_stat_statements'`, then a restart); without it `reset` answers why it cannot count.
The counts are the database's only, from `reset` on."""

from __future__ import annotations

import re
from typing import NamedTuple

from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine


class Statement(NamedTuple):
    calls: int
    blocks: int  # shared buffers hit or read
    exec_ms: float  # execution time, waits included
    query: str


_THIS_DATABASE = "(SELECT oid FROM pg_database WHERE datname = current_database())"
_TOP = text(
    "SELECT calls, shared_blks_hit + shared_blks_read AS blocks, total_exec_time AS exec_ms, "
    f"query FROM pg_stat_statements WHERE dbid = {_THIS_DATABASE} ORDER BY blocks DESC LIMIT :n"
)


async def reset(database_url: str) -> str | None:
    """Start counting the database's statements from now; None, or why they cannot be."""
    engine = create_async_engine(database_url, isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as db:
            loaded = (await db.execute(text("SHOW shared_preload_libraries"))).scalar_one()
            if "pg_stat_statements" not in loaded:
                return (
                    "pg_stat_statements is not loaded: ALTER SYSTEM SET shared_preload_libraries "
                    "= 'pg_stat_statements', then restart Postgres"
                )
            await db.execute(text("CREATE EXTENSION IF NOT EXISTS pg_stat_statements"))
            await db.execute(text(f"SELECT pg_stat_statements_reset(0, {_THIS_DATABASE}, 0)"))
    finally:
        await engine.dispose()
    return None


async def top(database_url: str, n: int) -> list[Statement]:
    """The `n` statements that touched the most shared buffers since `reset`."""
    engine = create_async_engine(database_url)
    try:
        async with engine.connect() as db:
            rows = (await db.execute(_TOP, {"n": n})).all()
    finally:
        await engine.dispose()
    return [
        Statement(calls, int(blocks), float(exec_ms), re.sub(r"\s+", " ", query))
        for calls, blocks, exec_ms, query in rows
    ]


def print_top(statements: list[Statement], *, jobs: int) -> None:
    """A line a statement: its calls, shared buffers a job and a call, execution ms in all."""
    total = sum(s.blocks for s in statements)
    print(f"Postgres statements by shared buffers touched (these {len(statements)}: {total:,}):")
    print(f"  {'calls':>7} {'blocks/job':>10} {'blocks/call':>11} {'exec ms':>9}  statement")
    for s in statements:
        print(
            f"  {s.calls:>7} {s.blocks / max(1, jobs):>10.1f} {s.blocks / max(1, s.calls):>11.1f} "
            f"{s.exec_ms:>9.0f}  {s.query[:110]}"
        )
