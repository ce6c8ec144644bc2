"""Alembic environment: one chain for SQLite and Postgres.

Normally run from `volcano_global.db.migrate`, which passes an open connection. Running the
`alembic` command directly also works: it reads `VGLOBAL_DATABASE_URL` (or sqlalchemy.url).
"""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy import Connection

from volcano_global.db.base import Base
from volcano_global.db.engine import create_engine
from volcano_global.db.models import *  # noqa: F403  (registers every table)

target_metadata = Base.metadata


def run_on(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=True,
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_standalone() -> None:
    from volcano_global.settings import get_settings

    url = context.config.get_main_option("sqlalchemy.url") or get_settings().database_url

    async def go() -> None:
        engine = create_engine(url)
        async with engine.connect() as conn:
            await conn.run_sync(run_on)
            await conn.commit()
        await engine.dispose()

    asyncio.run(go())


if context.is_offline_mode():
    raise SystemExit("offline (SQL script) migrations are not supported")

connection = context.config.attributes.get("connection")
if connection is None:
    run_standalone()
else:
    run_on(connection)
