"""A prefetch copy that ends while a round reads its input (Postgres: each read its own
snapshot; SQLite's one connection serialises them): the round sees the data in its destination
or on its way there, never in neither, so the job starts there without staging it again."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.data_rounds import clusters_of, put_inventory, rows
from tests.prefetch_support import copies, prefetching, report
from volcano_global.rpc.copies import CopyPhase
from volcano_global.services.scheduling import round_data


@pytest.fixture
def database_url(postgres_url: str) -> str:
    """Postgres only: see the module's docstring."""
    from tests.conftest import empty_postgres

    asyncio.run(empty_postgres(postgres_url))
    return postgres_url


async def test_a_copy_that_ends_while_the_round_reads_is_not_staged_again(
    app: FastAPI, api: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    uid, short = await prefetching(app, api)  # corpus-v3 on its way to gpu-a for `uid`
    (copy,) = await copies(app)
    assert (await api.post(f"/api/v1/jobs/{short}/cancel")).status_code == 200
    await put_inventory(api, "gpu-a")  # room in gpu-a now
    real = round_data.running_copies

    async def ended_meanwhile(session: Any) -> Any:
        monkeypatch.setattr(round_data, "running_copies", real)  # once
        await report(app, copy, CopyPhase.SUCCEEDED)  # committed between the round's reads
        return await real(session)

    monkeypatch.setattr(round_data, "running_copies", ended_meanwhile)
    assert (await app.state.scheduler.run_once()).result.placed == [uid]
    assert round_data.running_copies is real  # the copy ended in the middle of the round
    assert await clusters_of(api, uid) == ["gpu-a"]
    shares, _ = await rows(app, api, uid)
    assert [s.staging for s in shares] == [None]  # its data is there: no second copy
