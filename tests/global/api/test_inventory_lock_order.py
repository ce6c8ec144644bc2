"""Postgres: an inventory replacement through the REST API and an agent's delta of the same
cluster take the cluster's row first, so one waits for the other instead of deadlocking (the
replacement deleted the nodes first and updated the row last)."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import text

from tests.factories import REPLY_S, create_cluster, eventually, inventory
from volcano_global.db.engine import transaction
from volcano_global.schemas.clusters import InventoryDelta
from volcano_global.services.inventory.clusters import lock_cluster
from volcano_global.services.inventory.deltas import apply_delta


@pytest.fixture
def database_url(postgres_url: str) -> str:
    """Postgres only: SQLite has one writer at a time, no row locks."""
    from tests.conftest import empty_postgres

    asyncio.run(empty_postgres(postgres_url))
    return postgres_url


async def a_write_waits_for_a_lock(app: FastAPI) -> bool:
    async with transaction(app.state.sessions) as session:
        waiting = await session.scalar(
            text(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND datname = current_database()"
            )
        )
    return bool(waiting)


async def test_an_inventory_replacement_waits_for_a_delta_instead_of_deadlocking(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    await create_cluster(api, "east")
    base = inventory("east", tors=1, nodes_per_tor=4)
    assert (await api.put("/api/v1/clusters/east/inventory", json=base)).status_code == 200

    smaller = {**base, "nodes": base["nodes"][:2]}
    async with transaction(app.state.sessions) as session:  # an agent's delta, its row locked
        cluster = await lock_cluster(session, name="east")
        put = asyncio.create_task(api.put("/api/v1/clusters/east/inventory", json=smaller))
        await eventually(lambda: a_write_waits_for_a_lock(app))
        delta = InventoryDelta.model_validate({"nodeUpserts": [base["nodes"][0] | {"gpuUsed": 3}]})
        await apply_delta(session, cluster=cluster, delta=delta, seq=cluster.inventory_seq + 1)
    response = await asyncio.wait_for(put, 20)
    assert response.status_code == 200, response.text
    east = (await api.get("/api/v1/clusters/east")).json()
    assert east["nodes"]["total"] == 2
    assert east["capacity"] == [{"gpuModel": "H100", "total": 16, "free": 16, "used": 0}]


async def test_another_clusters_agent_is_refused_without_waiting_on_the_row(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    await create_cluster(api, "east")
    west = str((await create_cluster(api, "west"))["agentToken"])
    base = inventory("east", tors=1, nodes_per_tor=4)
    async with transaction(app.state.sessions) as session:  # an agent's delta holds east's row
        await lock_cluster(session, name="east")
        put = api.put(
            "/api/v1/clusters/east/inventory",
            json=base,
            headers={"Authorization": f"Bearer {west}"},
        )
        response = await asyncio.wait_for(put, REPLY_S)  # it waited for ever on the row before
    assert response.status_code == 403, response.text


async def test_a_cluster_deletion_waits_for_a_delta_instead_of_deadlocking(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    await create_cluster(api, "east")
    base = inventory("east", tors=1, nodes_per_tor=4)
    assert (await api.put("/api/v1/clusters/east/inventory", json=base)).status_code == 200
    async with transaction(app.state.sessions) as session:  # an agent's delta, its row locked
        cluster = await lock_cluster(session, name="east")
        deleted = asyncio.create_task(api.delete("/api/v1/clusters/east"))
        await eventually(lambda: a_write_waits_for_a_lock(app))
        delta = InventoryDelta.model_validate({"nodeUpserts": [base["nodes"][0] | {"gpuUsed": 3}]})
        # It updates the capacity rows the deletion deleted before it waited for the row.
        await apply_delta(session, cluster=cluster, delta=delta, seq=cluster.inventory_seq + 1)
    response = await asyncio.wait_for(deleted, 20)
    assert response.status_code == 204, response.text
    assert (await api.get("/api/v1/clusters/east")).status_code == 404
