"""The stored nodes a transaction of deltas leaves are kept for the next on SQLite
(`node_cache`): the next delta's usages read nothing, and what it counts is what the nodes
hold, whoever else wrote them since, whatever rolled back (both databases: Postgres reads every
time and must count the same)."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select, update

from tests.factories import create_cluster, inventory
from volcano_global.db.engine import transaction
from volcano_global.db.models import NODE_USE, Cluster, ClusterGpuCapacity, Node, NodeUse
from volcano_global.schemas.clusters import InventoryDelta
from volcano_global.services.inventory import deltas as deltas_module
from volcano_global.services.inventory.clusters import lock_cluster
from volcano_global.services.inventory.sequence import NumberedDelta, apply_in_sequence


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The node names the delta writer read from the database, in order."""
    names: list[str] = []
    read = deltas_module.stored_nodes

    async def counted(session: Any, wanted: dict[uuid.UUID, list[str]]) -> Any:
        names.extend(name for part in wanted.values() for name in part)
        return await read(session, wanted)

    monkeypatch.setattr(deltas_module, "stored_nodes", counted)
    return names


async def _east(api: httpx.AsyncClient) -> list[str]:
    await create_cluster(api, "east")
    shape = inventory("east", tors=1, nodes_per_tor=3)
    assert (await api.put("/api/v1/clusters/east/inventory", json=shape)).status_code == 200
    return [n["name"] for n in shape["nodes"]]


async def _usages(app: FastAPI, used: dict[str, int], *, fail: bool = False) -> None:
    """East's next delta: these nodes' GPUs used (`fail`: its transaction then rolls back)."""
    delta = InventoryDelta.model_validate(
        {"nodeUsages": [{"name": name, "gpuUsed": gpus} for name, gpus in used.items()]}
    )
    with pytest.raises(RuntimeError) if fail else _nothing():
        async with transaction(app.state.sessions) as session:
            cluster = await lock_cluster(session, name="east")
            numbered = NumberedDelta(cluster.inventory_seq + 1, delta)
            await apply_in_sequence(session, cluster=cluster, deltas=[numbered])
            if fail:
                raise RuntimeError("the transaction fails after the delta")


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *_: object) -> None:
        return None


async def _free(app: FastAPI) -> tuple[int, int]:
    """(east's free H100 GPUs as kept, as its nodes add up)"""
    async with transaction(app.state.sessions) as session:
        kept = await session.scalar(select(ClusterGpuCapacity.free_gpus))
        nodes = (
            await session.execute(
                select(Node.gpu_allocatable, NodeUse.gpu_used).join(NodeUse, NODE_USE)
            )
        ).all()
    return int(kept or 0), sum(max(a - u, 0) for a, u in nodes)


async def _written_by_another(app: FastAPI, name: str, *, used: int, fewer_free: int) -> None:
    """As another process or release would: the node, east's free GPUs and its next
    sequence written, nothing kept in this process."""
    async with transaction(app.state.sessions) as session:
        cluster = await lock_cluster(session, name="east")
        await session.execute(update(NodeUse).where(NodeUse.name == name).values(gpu_used=used))
        capacity = await session.scalar(select(ClusterGpuCapacity))
        assert capacity is not None
        capacity.free_gpus -= fewer_free
        cluster.inventory_seq += 1


def _sqlite(app: FastAPI) -> bool:
    return bool(app.state.sessions.kw["bind"].dialect.name == "sqlite")


async def test_a_cached_clusters_usages_read_nothing(
    app: FastAPI, api: httpx.AsyncClient, reads: list[str]
) -> None:
    a, b, c = await _east(api)
    await _usages(app, {a: 1, b: 2})
    assert reads == [a, b]
    await _usages(app, {a: 3, b: 2, c: 4})
    await _usages(app, {a: 0})
    kept, summed = await _free(app)
    assert kept == summed == 24 - 6
    assert reads == ([a, b, c] if _sqlite(app) else [a, b, a, b, c, a])


async def test_nodes_written_since_by_another_writer_are_read_again(
    app: FastAPI, api: httpx.AsyncClient, reads: list[str]
) -> None:
    """Another process (or release) writes a node and stores the next sequence: the cache is
    of an older sequence, so the next delta reads, and counts from what the node holds."""
    a, b, _ = await _east(api)
    await _usages(app, {a: 1, b: 1})
    await _written_by_another(app, a, used=5, fewer_free=4)
    reads.clear()
    await _usages(app, {a: 2})
    assert reads == [a]
    kept, summed = await _free(app)
    assert kept == summed == 24 - 3


async def test_a_rolled_back_delta_leaves_nothing_cached(
    app: FastAPI, api: httpx.AsyncClient, reads: list[str]
) -> None:
    a, b, _ = await _east(api)
    await _usages(app, {a: 1})
    await _usages(app, {a: 7, b: 7}, fail=True)
    reads.clear()
    await _usages(app, {b: 1})
    assert reads == [b]  # the cached rows went with the rollback: read again
    async with transaction(app.state.sessions) as session:
        used = dict((await session.execute(select(NodeUse.name, NodeUse.gpu_used))).all())
    assert (used[a], used[b]) == (1, 1)
    kept, summed = await _free(app)
    assert kept == summed == 24 - 2


async def test_rows_of_a_rolled_back_delta_are_not_taken_for_another_writers_same_sequence(
    app: FastAPI, api: httpx.AsyncClient, reads: list[str]
) -> None:
    """A delta at s+1 rolls back; another writer then stores s+1 with other values: rows the
    delta kept before its commit would carry s+1 too, and must never have been cached."""
    a, b, _ = await _east(api)
    await _usages(app, {a: 1})
    await _usages(app, {a: 7}, fail=True)
    await _written_by_another(app, a, used=3, fewer_free=2)
    reads.clear()
    await _usages(app, {a: 2, b: 1})
    assert reads == [a, b]
    kept, summed = await _free(app)
    assert kept == summed == 24 - 3


async def test_a_snapshot_replaces_what_is_cached(
    app: FastAPI, api: httpx.AsyncClient, reads: list[str]
) -> None:
    a, b, _ = await _east(api)
    await _usages(app, {a: 4, b: 4})
    shape = inventory("east", tors=1, nodes_per_tor=3, used=2)
    assert (await api.put("/api/v1/clusters/east/inventory", json=shape)).status_code == 200
    reads.clear()
    await _usages(app, {a: 3})
    assert reads == [a]
    kept, summed = await _free(app)
    assert kept == summed == 24 - 3 - 2 - 2
    async with transaction(app.state.sessions) as session:
        east = (await session.execute(select(Cluster))).scalar_one()
    assert east.nodes_total == 3


async def test_a_run_with_a_hypernode_change_caches_what_follows_the_change(
    app: FastAPI, api: httpx.AsyncClient, reads: list[str]
) -> None:
    """Usages, a new HyperNode (the inventory rebuilt: a new generation), usages again, in
    one run: the rows cached are those read after the rebuild, at the new generation."""
    a, b, c = await _east(api)
    await _usages(app, {a: 1, b: 1})
    reads.clear()
    run = [
        {"nodeUsages": [{"name": a, "gpuUsed": 2}]},
        {"domainUpserts": [{"name": "east-tor9", "tier": 1, "parent": "east-spine"}]},
        {"nodeUsages": [{"name": a, "gpuUsed": 5}, {"name": c, "gpuUsed": 1}]},
    ]
    async with transaction(app.state.sessions) as session:
        cluster = await lock_cluster(session, name="east")
        numbered = [
            NumberedDelta(cluster.inventory_seq + i, InventoryDelta.model_validate(d))
            for i, d in enumerate(run, 1)
        ]
        await apply_in_sequence(session, cluster=cluster, deltas=numbered)
    await _usages(app, {a: 4, b: 2})
    assert reads == (
        [a, c, b] if _sqlite(app) else [a, a, c, a, b]
    )  # b: not read since the rebuild
    kept, summed = await _free(app)
    assert kept == summed == 24 - 7
