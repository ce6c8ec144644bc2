"""The per-generation cache of topology trees (SQLite and Postgres): a replacement rolled back
never reaches it, a committed one replaces the cached tree, and deltas and rounds see the
current tree."""

from __future__ import annotations

import httpx
from fastapi import FastAPI
from sqlalchemy import select

from tests.factories import create_cluster, inventory
from volcano_global.db.engine import transaction
from volcano_global.db.models import Cluster
from volcano_global.schemas.clusters import InventoryDelta, InventorySnapshot
from volcano_global.services.inventory.clusters import lock_cluster
from volcano_global.services.inventory.deltas import apply_delta
from volcano_global.services.inventory.domain_trees import domain_trees
from volcano_global.services.inventory.snapshots import replace_inventory
from volcano_global.services.scheduling.round_input import read_round


async def _tree_names(app: FastAPI) -> set[str]:
    async with app.state.sessions() as session:
        cluster = (await session.execute(select(Cluster))).scalar_one()
        tree = (await domain_trees(session, {cluster.id: cluster.inventory_generation}))[cluster.id]
        return set(tree.ids)


async def test_rolled_back_replacement_does_not_reach_the_cache(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    await create_cluster(api, "east")
    await api.put("/api/v1/clusters/east/inventory", json=inventory("east", tors=2))
    assert await _tree_names(app) == {"east-spine", "east-tor0", "east-tor1"}

    bigger = InventorySnapshot.model_validate(inventory("east", tors=3))
    async with app.state.sessions() as session:
        cluster = (await session.execute(select(Cluster))).scalar_one()
        await replace_inventory(session, cluster=cluster, snapshot=bigger)
        own = (await domain_trees(session, {cluster.id: cluster.inventory_generation}))[cluster.id]
        assert "east-tor2" in own.ids  # the session sees its own replacement
        await session.rollback()
    # Next committed replacement: the generation number the rolled-back one had, with other
    # domains; not confused with it.
    await api.put("/api/v1/clusters/east/inventory", json=inventory("east", tors=1))
    assert await _tree_names(app) == {"east-spine", "east-tor0"}


async def test_deltas_and_rounds_use_the_tree_of_the_current_generation(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    await create_cluster(api, "east")
    await api.put("/api/v1/clusters/east/inventory", json=inventory("east", tors=2))
    await _tree_names(app)  # cached
    await api.put("/api/v1/clusters/east/inventory", json=inventory("east", tors=3))
    node = inventory("east", tors=3)["nodes"][-1] | {"gpuUsed": 8}
    async with transaction(app.state.sessions) as session:
        cluster = await lock_cluster(session, name="east")
        delta = InventoryDelta.model_validate({"nodeUpserts": [node]})
        await apply_delta(session, cluster=cluster, delta=delta, seq=cluster.inventory_seq + 1)
    async with transaction(app.state.sessions) as session:
        data, _ = await read_round(session, window=1)
    (east,) = data.clusters
    leaves = {leaf.path: leaf.free_nodes for leaf in east.leaves}
    assert leaves[("east-tor2", "east-spine")][0] == 1  # the changed node, in the new domain


async def test_a_read_tree_holds_each_domain_id_once(app: FastAPI, api: httpx.AsyncClient) -> None:
    """A parent is the very id object of its own domain (the driver gives each row's value an
    object of its own): trees are kept, and each object is walked by full collections."""
    await create_cluster(api, "east")
    await api.put("/api/v1/clusters/east/inventory", json=inventory("east", tors=3))
    async with app.state.sessions() as session:
        cluster = (await session.execute(select(Cluster))).scalar_one()
        tree = (await domain_trees(session, {cluster.id: cluster.inventory_generation}))[cluster.id]
    spine = tree.ids["east-spine"]
    assert [tree.parents[tree.ids[f"east-tor{i}"]] for i in range(3)] == [spine] * 3
    assert all(tree.parents[tree.ids[f"east-tor{i}"]] is spine for i in range(3))
    assert tree.parents[spine] is None
    assert {id(d) for d in tree.names} == {id(d) for d in tree.ids.values()}
