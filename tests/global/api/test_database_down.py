"""When the database cannot be reached, the API answers 503 (retry), never 500; a statement the
database refuses for what it holds is no reason to retry (500)."""

from __future__ import annotations

import socket

import httpx
import pytest
from fastapi import FastAPI

from tests.conftest import ADMIN_TOKEN
from tests.factories import create_cluster, inventory
from tests.sqlite_limits import limit_variables
from volcano_global.app import create_app
from volcano_global.db.engine import create_engine, create_session_factory
from volcano_global.settings import Settings


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_unreachable_database_gives_503(settings: Settings) -> None:
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        dead = create_engine(f"postgresql+asyncpg://postgres@127.0.0.1:{_closed_port()}/gone")
        app.state.engine, app.state.sessions = dead, create_session_factory(dead)
        transport = httpx.ASGITransport(app=app)
        headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        async with httpx.AsyncClient(
            transport=transport, base_url="http://t", headers=headers
        ) as api:
            ready = await api.get("/readyz")
            assert ready.status_code == 503
            assert ready.json()["reason"] == "ServiceUnavailable"
            listed = await api.get("/api/v1/queues")
            assert listed.status_code == 503, listed.text
            assert listed.json()["message"] == "database busy or unreachable; retry"
            assert (await api.get("/healthz")).status_code == 200
        await dead.dispose()


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)  # SQLite's own limit
async def test_a_statement_sqlite_refuses_gives_500_not_retry(
    app: FastAPI, api: httpx.AsyncClient, database_url: str
) -> None:
    """A topology of 61 HyperNodes reads their capacity in one statement of 61 bind
    parameters, over a limit of 50: 'too many SQL variables' fails it again however often it
    is retried (it answered 503, retry)."""
    await create_cluster(api, "gpu-a")
    put = await api.put(
        "/api/v1/clusters/gpu-a/inventory", json=inventory("gpu-a", tors=60, nodes_per_tor=1)
    )
    assert put.status_code == 200, put.text
    await limit_variables(app.state.sessions.kw["bind"], 50)
    response = await api.get("/api/v1/clusters/gpu-a/topology")
    assert response.status_code == 500, response.text
    assert response.json()["reason"] == "InternalError"
    assert "Retry-After" not in response.headers
