"""When the database cannot be reached, the API answers 503 (retry), never 500."""

from __future__ import annotations

import socket

import httpx

from tests.conftest import ADMIN_TOKEN
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
