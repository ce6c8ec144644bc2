"""The node change log is bounded by the nodes it holds: a cluster's many small deltas stay in
it for many sequences, large ones are pruned every `KEPT_SEQS` or so, and the count the
cluster's row keeps is what its rows hold."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select

from tests.factories import create_cluster, inventory, next_delta
from volcano_global.db.engine import transaction
from volcano_global.db.models import Cluster, NodeChange
from volcano_global.services.inventory import node_changes
from volcano_global.services.inventory.node_changes import _floor_for

KEPT = 3


@pytest.fixture(autouse=True)
def _short_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(node_changes, "KEPT_SEQS", KEPT)


async def _east(api: httpx.AsyncClient) -> list[dict[str, Any]]:
    """Cluster east with 12 nodes (so it keeps `KEPT_NODES` logged nodes, 1,000)."""
    await create_cluster(api, "east")
    shape = inventory("east", tors=3, nodes_per_tor=4)
    assert (await api.put("/api/v1/clusters/east/inventory", json=shape)).status_code == 200
    return list(shape["nodes"])


async def _delta(app: FastAPI, upserts: list[dict[str, Any]]) -> None:
    await next_delta(app, "east", {"nodeUpserts": upserts})


async def _log(app: FastAPI) -> tuple[int, int, int, list[tuple[int, int]]]:
    """(east's sequence, floor, logged-node count, its log's (seq, node_count) oldest first)"""
    async with transaction(app.state.sessions) as session:
        east = (await session.execute(select(Cluster).where(Cluster.name == "east"))).scalar_one()
        rows = await session.execute(
            select(NodeChange.seq, NodeChange.node_count)
            .where(NodeChange.cluster_id == east.id)
            .order_by(NodeChange.seq)
        )
        logged = [(seq, count) for seq, count in rows]
        return east.inventory_seq, east.node_changes_floor, east.node_changes_nodes, logged


async def test_small_deltas_stay_logged_far_past_the_sequence_window(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    """A share's pods come and go: one node a delta, many deltas a second. Forty of them
    (more than ten times the window of 3 sequences) are all still in the log."""
    nodes = await _east(api)
    _, floor_before, _, _ = await _log(app)
    for step in range(40):
        await _delta(app, [nodes[step % len(nodes)] | {"gpuUsed": 1 + step % 8}])
    _, floor, held, logged = await _log(app)
    assert floor == floor_before
    assert len(logged) == 40 and held == 40
    assert all(count == 1 for _, count in logged)


async def test_the_log_is_pruned_to_the_nodes_it_keeps(
    app: FastAPI, api: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keeping 5 nodes: past 10 (and 6 sequences) the oldest rows go until 5 are left, and the
    cluster's count is what the rows hold; deltas of 4 nodes keep the newest 3 sequences
    whatever they hold."""
    monkeypatch.setattr(node_changes, "kept_nodes", lambda cluster: 5)
    nodes = await _east(api)
    for step in range(11):
        await _delta(app, [nodes[step] | {"gpuUsed": 3}])
    seq, floor, held, logged = await _log(app)
    assert [s for s, _ in logged] == list(range(seq - 4, seq + 1))
    assert (floor, held) == (seq - 5, 5)
    for step in range(8):
        await _delta(app, nodes[step : step + 4])
    seq, floor, held, logged = await _log(app)
    assert held == sum(count for _, count in logged)
    assert seq - floor <= 2 * KEPT and logged[-KEPT:] == [(s, 4) for s in range(seq - 2, seq + 1)]


async def test_a_snapshot_empties_the_log_and_its_count(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    nodes = await _east(api)
    await _delta(app, nodes[:3])
    assert (await _log(app))[2] == 3
    shape = inventory("east", tors=3, nodes_per_tor=4)
    assert (await api.put("/api/v1/clusters/east/inventory", json=shape)).status_code == 200
    seq, floor, held, logged = await _log(app)
    assert (floor, held, logged) == (seq, 0, [])


@pytest.mark.parametrize(
    ("newest_first", "seq", "kept", "floor_before", "floor", "held"),
    [
        # the newest KEPT sequences stay whatever they hold
        ([(20, 9), (19, 9), (18, 9), (17, 1)], 20, 5, 0, 17, 27),
        # older rows stay while the kept nodes allow
        ([(20, 1), (19, 1), (18, 1), (15, 2), (12, 4), (11, 1)], 20, 5, 0, 14, 5),
        # empty deltas leave gaps: the window counts sequences, not rows
        ([(20, 1), (14, 1), (13, 1)], 20, 2, 0, 13, 2),
        # an older release's rows, counted 0
        ([(20, 1), (19, 0), (10, 0), (9, 0)], 20, 5, 0, 8, 1),
        # never below the floor before, nor keeping a row at it (logged by the transaction
        # that restarted the log at that sequence)
        ([(20, 1), (19, 1), (10, 1)], 20, 5, 10, 17, 2),
        ([(20, 1), (19, 1), (12, 1)], 20, 5, 10, 11, 3),
    ],
)
def test_the_floor_keeps_the_window_then_what_fits(
    newest_first: list[tuple[int, int]],
    seq: int,
    kept: int,
    floor_before: int,
    floor: int,
    held: int,
) -> None:
    assert _floor_for(newest_first, seq, kept, floor_before) == (floor, held)
