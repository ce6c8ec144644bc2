"""Fixtures shared by every test: each database test runs on SQLite and on Postgres.

Postgres is reached at VGLOBAL_TEST_POSTGRES_URL (default: the local server with trust auth).
A test session creates its own database and drops it at the end. If Postgres cannot be
reached the Postgres tests fail, never skip: CI must not go green without them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.engine import make_url

from volcano_global.app import create_app
from volcano_global.db import migrate
from volcano_global.db.base import Base
from volcano_global.db.engine import create_engine
from volcano_global.settings import Settings

if TYPE_CHECKING:
    from tests.server_process import ServerProcess

ADMIN_TOKEN = "vg_test_admin_token"
# The tests' jobs run in namespace `ml` whatever their queue (tests/factories.py): every Global
# they start (in process or a server process, which inherits the environment) lets each queue
# use it besides its own. Tests of the default itself pass `tenancy` explicitly.
os.environ.setdefault("VGLOBAL_TENANCY__DEFAULT_NAMESPACES", '["{queue}", "ml"]')
POSTGRES_ADMIN_URL = os.environ.get(
    "VGLOBAL_TEST_POSTGRES_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres"
)
REPO = Path(__file__).resolve().parent.parent


def _asyncpg_dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


async def create_postgres_database(name: str) -> str:
    """Create an empty database and return its SQLAlchemy URL."""
    try:
        conn = await asyncpg.connect(_asyncpg_dsn(POSTGRES_ADMIN_URL), timeout=10)
    except (OSError, asyncpg.PostgresError) as exc:
        pytest.fail(
            f"Postgres is not reachable at {POSTGRES_ADMIN_URL} ({exc}); start it or set "
            "VGLOBAL_TEST_POSTGRES_URL. Postgres tests never skip.",
            pytrace=False,
        )
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    return make_url(POSTGRES_ADMIN_URL).set(database=name).render_as_string(hide_password=False)


async def drop_postgres_database(name: str) -> None:
    conn = await asyncpg.connect(_asyncpg_dsn(POSTGRES_ADMIN_URL), timeout=10)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """One migrated Postgres database for the whole session; each test empties it."""
    name = f"vglobal_test_{os.getpid()}"
    url = asyncio.run(create_postgres_database(name))

    async def upgrade() -> None:
        engine = create_engine(url)
        await migrate.upgrade(engine)
        await engine.dispose()

    asyncio.run(upgrade())
    yield url
    asyncio.run(drop_postgres_database(name))


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite file copied for each test (faster than migrating each time)."""
    path = tmp_path_factory.mktemp("sqlite-template") / "template.db"

    async def upgrade() -> None:
        engine = create_engine(f"sqlite+aiosqlite:///{path}")
        await migrate.upgrade(engine)
        await engine.dispose()

    asyncio.run(upgrade())
    return path


# Referencing tables first. DELETE, not TRUNCATE: a test leaves a few rows, and TRUNCATE
# makes new files for every table and index.
_EMPTY_EVERY_TABLE = ";".join(
    f'DELETE FROM "{t.name}"' for t in reversed(Base.metadata.sorted_tables)
)


async def empty_postgres(url: str) -> None:
    conn = await asyncpg.connect(_asyncpg_dsn(url), timeout=10)
    try:
        async with conn.transaction():
            await conn.execute(_EMPTY_EVERY_TABLE)
    finally:
        await conn.close()


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A migrated, empty database of each kind."""
    if request.param == "sqlite":
        path = tmp_path / "vglobal.db"
        shutil.copy(request.getfixturevalue("sqlite_template"), path)
        return f"sqlite+aiosqlite:///{path}"
    url: str = request.getfixturevalue("postgres_url")
    asyncio.run(empty_postgres(url))
    return url


def app_settings(database_url: str, **sections: Any) -> Settings:
    """The in-process Global of the tests (admin token, any free gRPC port). The scheduling
    loop is off (API tests check states it would change; the scheduler tests drive rounds
    themselves). Its stop gives open agent streams 0.2 s, not 2 s: tests leave streams open
    that nothing will end. `sections` replace whole settings sections, e.g. `agents={...}`."""
    return Settings(
        **{
            "database_url": database_url,
            "admin_token": ADMIN_TOKEN,
            "grpc_port": 0,
            "scheduling": {"enabled": False},
            "agents": {"shutdown_grace_s": 0.2},
            **sections,
        }
    )


@pytest.fixture
def settings(database_url: str) -> Settings:
    return app_settings(database_url)


@pytest.fixture
async def app(settings: Settings) -> AsyncIterator[FastAPI]:
    """The Global in-process with its lifespan run (migrations, bootstrap, the agent gRPC
    server on a free loopback port: `app.state.grpc_port`)."""
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        yield application


def admin_client(app: FastAPI) -> httpx.AsyncClient:
    """The REST API of `app` in-process, as the admin."""
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://vglobal.test",
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    )


@contextlib.asynccontextmanager
async def running(settings: Settings) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """A Global of its own settings, its lifespan run, and its REST API as the admin."""
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        async with admin_client(application) as client:
            yield application, client


@pytest.fixture
async def api(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """The REST API of `app`, as the admin."""
    async with admin_client(app) as client:
        yield client


@pytest.fixture
def fresh_database_name() -> str:
    return f"vglobal_test_{uuid.uuid4().hex[:12]}"


@pytest.fixture
async def postgres_server(tmp_path: Path, fresh_database_name: str) -> AsyncIterator[ServerProcess]:
    """A scheduling `vglobal server` process (not yet started: set its env first) on a fresh
    Postgres database; stopped and the database dropped after the test."""
    from tests.server_process import ServerProcess  # it imports this module

    url = await create_postgres_database(fresh_database_name)
    server = ServerProcess(url, tmp_path, scheduling=True)
    yield server
    server.stop()
    await drop_postgres_database(fresh_database_name)
