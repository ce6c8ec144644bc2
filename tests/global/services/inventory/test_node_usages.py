"""A delta's node usages (SQLite and Postgres): stored from the node's other columns, refused
above its allocatable GPUs with the field named, folded into an earlier upsert of the same
run, and a usage of a node the cluster does not hold asks for a snapshot with nothing of its
run written. (Aggregates and the scheduler's view through random usages:
test_deltas.py.)"""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select

from tests.factories import create_cluster, inventory
from volcano_global.db.engine import transaction
from volcano_global.db.models import Cluster, ClusterGpuCapacity, NodeUse
from volcano_global.errors import Invalid
from volcano_global.schemas.clusters import InventoryDelta
from volcano_global.services.inventory.clusters import lock_cluster
from volcano_global.services.inventory.deltas import merged
from volcano_global.services.inventory.node_changes import logged_since
from volcano_global.services.inventory.node_usages import StaleUsage
from volcano_global.services.inventory.node_values import CheckedDelta, checked_delta
from volcano_global.services.inventory.sequence import NumberedDelta, apply_in_sequence


def _delta(**fields: object) -> CheckedDelta:
    return checked_delta(InventoryDelta.model_validate(fields))


async def _east(api: httpx.AsyncClient) -> list[str]:
    await create_cluster(api, "east")
    base = inventory("east", tors=1, nodes_per_tor=3)
    await api.put("/api/v1/clusters/east/inventory", json=base)
    return [n["name"] for n in base["nodes"]]


async def _apply(app: FastAPI, *deltas: CheckedDelta) -> object:
    async with transaction(app.state.sessions) as session:
        cluster = await lock_cluster(session, name="east")
        numbered = [NumberedDelta(cluster.inventory_seq + i, d) for i, d in enumerate(deltas, 1)]
        return await apply_in_sequence(session, cluster=cluster, deltas=numbered)


async def _stored(app: FastAPI) -> tuple[dict[str, tuple[int, int, int]], int, int]:
    """Each node's (GPUs, CPU, memory) used, the cluster's free H100 GPUs and sequence."""
    async with transaction(app.state.sessions) as session:
        rows = await session.execute(
            select(
                NodeUse.name, NodeUse.gpu_used, NodeUse.cpu_used_millis, NodeUse.memory_used_bytes
            )
        )
        used = {name: (gpus, cpu, memory) for name, gpus, cpu, memory in rows}
        free = await session.scalar(select(ClusterGpuCapacity.free_gpus))
        seq = await session.scalar(select(Cluster.inventory_seq))
    return used, int(free or 0), int(seq or 0)


async def test_a_usage_is_stored_counted_and_logged(app: FastAPI, api: httpx.AsyncClient) -> None:
    a, b, _ = await _east(api)
    used, free, seq = await _stored(app)
    usage = {"name": a, "gpuUsed": 6, "cpuUsedMillis": 1500, "memoryUsedBytes": 1 << 30}
    outcome = await _apply(app, _delta(nodeUsages=[usage]))
    assert outcome.resync is None and outcome.acked_seq == seq + 1
    after, free_after, seq_after = await _stored(app)
    assert after[a] == (6, 1500, 1 << 30) and after[b] == used[b]
    assert free_after == free - (6 - used[a][0]) and seq_after == seq + 1
    async with transaction(app.state.sessions) as session:
        cluster_id = await session.scalar(select(Cluster.id))
        logged = await logged_since(session, {cluster_id: seq})
    ((_, nodes),) = logged
    assert [(n[0], n[3], n[4]) for n in nodes] == [(a, 8, 6)]  # name, allocatable, used


async def test_a_usage_above_the_nodes_gpus_names_the_field(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    a, _, _ = await _east(api)
    before = await _stored(app)
    with pytest.raises(Invalid) as refused:
        await _apply(app, _delta(nodeUsages=[{"name": a, "gpuUsed": 9}]))
    (error,) = refused.value.errors
    assert error.field == "nodeUsages.gpuUsed"
    assert "9 GPUs used exceed its 8 allocatable" in error.message
    assert await _stored(app) == before


async def test_a_usage_of_a_node_not_held_asks_for_a_snapshot_and_writes_nothing(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    a, b, _ = await _east(api)
    before = await _stored(app)
    runs = [
        [_delta(nodeUsages=[{"name": "gone", "gpuUsed": 1}])],
        # runs of several pieces (a HyperNode change between): refused before any is written
        [
            _delta(nodeUsages=[{"name": a, "gpuUsed": 2}]),
            _delta(domainUpserts=[{"name": "east-tor9", "tier": 1}]),
            _delta(nodeUsages=[{"name": "gone", "gpuUsed": 1}]),
        ],
        [
            _delta(nodeUsages=[{"name": a, "gpuUsed": 2}]),
            _delta(domainUpserts=[{"name": "east-tor9", "tier": 1}]),
            _delta(nodeRemovals=[b]),
            _delta(nodeUsages=[{"name": b, "gpuUsed": 1}]),
        ],
    ]
    for run in runs:
        outcome = await _apply(app, *run)
        assert outcome.acked_seq is None
        assert outcome.resync is not None and "send a snapshot" in outcome.resync.reason
        assert outcome.resync.applied_seq == before[2]
        assert await _stored(app) == before


def test_a_run_folds_a_usage_into_the_nodes_upsert_before_it() -> None:
    node = inventory("east")["nodes"][0]
    pieces = merged(
        [
            _delta(nodeUpserts=[node | {"name": "a", "gpuUsed": 1}]),
            _delta(nodeUsages=[{"name": "a", "gpuUsed": 4}, {"name": "b", "gpuUsed": 2}]),
            _delta(nodeUsages=[{"name": "b", "gpuUsed": 3}]),
        ]
    )
    ((piece),) = pieces
    assert [(n.name, n.gpu_used) for n in piece.node_upserts] == [("a", 4)]
    assert [(u.name, u.gpu_used) for u in piece.node_usages] == [("b", 3)]
    with pytest.raises(StaleUsage):
        merged([_delta(nodeRemovals=["b"]), _delta(nodeUsages=[{"name": "b", "gpuUsed": 1}])])
    with pytest.raises(Invalid):  # above the GPUs of the upsert it folds into
        merged(
            [
                _delta(nodeUpserts=[node | {"name": "a", "gpuUsed": 1}]),
                _delta(nodeUsages=[{"name": "a", "gpuUsed": 9}]),
            ]
        )
