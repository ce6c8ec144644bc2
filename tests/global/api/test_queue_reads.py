"""A queue deleted while it is being read (Postgres: a read sees each statement's own snapshot,
GETs running in autocommit; SQLite's read holds one snapshot, and the delete waits for it)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from tests.factories import create_queue
from volcano_global.api import queues as queues_api


@pytest.fixture
def database_url(postgres_url: str) -> str:
    """Postgres only: see the module's docstring."""
    from tests.conftest import empty_postgres

    asyncio.run(empty_postgres(postgres_url))
    return postgres_url


async def test_a_queue_deleted_while_it_is_read_is_gone_not_a_server_error(
    api: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A delete that commits between a queue's row and its share leaves it out of the list and
    makes its own read a 404. It was a 500 (KeyError), which ended `vglobal get queues -w` on
    Postgres under load."""
    real = queues_api.current_shares
    deleting: list[str] = []

    async def deleted_in_between(session: Any) -> Any:
        while deleting:
            assert (await api.delete(f"/api/v1/queues/{deleting.pop()}")).status_code == 204
        return await real(session)

    monkeypatch.setattr(queues_api, "current_shares", deleted_in_between)
    for read, status in (("/api/v1/queues", 200), ("/api/v1/queues/llm", 404)):
        await create_queue(api, "llm")
        deleting.append("llm")
        response = await api.get(read)
        assert response.status_code == status, response.text
        assert not deleting  # deleted in between
        if status == 200:
            assert [q["name"] for q in response.json()["items"]] == ["default"]
