"""The scheduler's capacity view stays equal to what the stored nodes add up to while it reads
only the node change log: through deltas, empty deltas, the log's pruning and a
writer that does not log (a replica of an older release), on SQLite and Postgres."""

from __future__ import annotations

import asyncio
import gc
import uuid
from collections import defaultdict
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import func, select, update

from tests.factories import create_cluster, inventory, next_delta
from volcano_global import loop_turns
from volcano_global.db.engine import transaction
from volcano_global.db.models import NODE_USE, Cluster, Node, NodeChange, NodeUse
from volcano_global.services.inventory import node_changes
from volcano_global.services.inventory.clusters import lock_cluster
from volcano_global.services.scheduling import capacity_view
from volcano_global.services.scheduling.capacity_view import free_histograms

KEPT = 3  # sequences the log keeps (at least; at most twice as many), small to prune often


@pytest.fixture(autouse=True)
def _short_log(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(node_changes, "KEPT_SEQS", KEPT)
    monkeypatch.setattr(node_changes, "kept_nodes", lambda cluster: 1)


async def _view_and_nodes(app: FastAPI) -> tuple[dict, dict]:
    """(the view's histograms of cluster east, the same recomputed from its stored nodes)"""
    async with transaction(app.state.sessions) as session:
        east = (await session.execute(select(Cluster).where(Cluster.name == "east"))).scalar_one()
        view = (await free_histograms(session, [east]))[east.id]
        recomputed: dict = defaultdict(lambda: [0] * 9)
        east_nodes = select(Node, NodeUse).join(NodeUse, NODE_USE).where(Node.cluster_id == east.id)
        for node, use in (await session.execute(east_nodes)).all():
            if node.ready and node.schedulable and node.gpu_allocatable > 0:
                hist = recomputed[(node.domain_id, node.gpu_model or "unknown")]
                hist[max(node.gpu_allocatable - use.gpu_used, 0)] += 1
    return view, {key: tuple(h) for key, h in recomputed.items()}


async def _east_id(app: FastAPI) -> uuid.UUID:
    async with transaction(app.state.sessions) as session:
        return (
            await session.execute(select(Cluster.id).where(Cluster.name == "east"))
        ).scalar_one()


async def _delta(app: FastAPI, upserts: list[dict[str, Any]]) -> None:
    """The next delta of east's agent (empty when `upserts` is), as the agent's stream applies it."""
    await next_delta(app, "east", {"nodeUpserts": upserts})


async def _log_rows(app: FastAPI) -> int:
    async with transaction(app.state.sessions) as session:
        return int(await session.scalar(select(func.count()).select_from(NodeChange)) or 0)


async def test_the_view_stays_exact_when_the_log_is_pruned_past_it(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    """Read after every delta, after a few, and after more than the log keeps: each node
    changed once, so a change the view missed would stay missing."""
    await create_cluster(api, "east")
    nodes = inventory("east", tors=3, nodes_per_tor=4)["nodes"]
    await api.put(
        "/api/v1/clusters/east/inventory", json=inventory("east", tors=3, nodes_per_tor=4)
    )
    view, expected = await _view_and_nodes(app)
    assert view == expected
    used = 0
    for reads_after in (1, 1, 2, KEPT, 2 * KEPT + 2, 1):
        for _ in range(reads_after):
            used += 1
            await _delta(app, [nodes[used % len(nodes)] | {"gpuUsed": used % 9}])
            await _delta(app, [])  # an empty delta: only the sequence moves
        view, expected = await _view_and_nodes(app)
        assert view == expected, f"read after {reads_after} deltas"
        assert await _log_rows(app) <= 2 * KEPT  # pruned as it goes


async def test_a_view_the_log_covers_reads_the_log_not_the_nodes(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    """A node rewritten behind the log's back (no sequence of its own) is not read again while
    the log covers the view: the view takes the logged nodes' values, it reads no node."""
    await create_cluster(api, "east")
    nodes = inventory("east", tors=3, nodes_per_tor=4)["nodes"]
    await api.put(
        "/api/v1/clusters/east/inventory", json=inventory("east", tors=3, nodes_per_tor=4)
    )
    before, _ = await _view_and_nodes(app)
    async with transaction(app.state.sessions) as session:
        await session.execute(
            update(NodeUse).where(NodeUse.name == nodes[0]["name"]).values(gpu_used=8)
        )
    await _delta(app, [nodes[1] | {"gpuUsed": 8}])
    view, expected = await _view_and_nodes(app)
    assert view != expected  # nodes[0]'s change is not read
    assert sum(sum(h) for h in view.values()) == sum(sum(h) for h in before.values())
    assert sum(h[0] for h in expected.values()) == sum(h[0] for h in view.values()) + 1


async def test_sequences_stored_without_logging_make_the_view_read_the_cluster_whole(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    """A replica of an older release writes nodes and stores the sequence, and logs nothing:
    the view reads the cluster whole, then and after the next logged delta."""
    await create_cluster(api, "east")
    nodes = inventory("east", tors=3, nodes_per_tor=4)["nodes"]
    await api.put(
        "/api/v1/clusters/east/inventory", json=inventory("east", tors=3, nodes_per_tor=4)
    )
    await _view_and_nodes(app)
    for step, name in enumerate((nodes[0]["name"], nodes[1]["name"])):
        async with transaction(app.state.sessions) as session:
            cluster = await lock_cluster(session, name="east")
            await session.execute(update(NodeUse).where(NodeUse.name == name).values(gpu_used=8))
            cluster.inventory_seq += 1  # as the older release does: no log row, no bounds
        if step:
            await _delta(app, [nodes[2] | {"gpuUsed": 7}])
        view, expected = await _view_and_nodes(app)
        assert view == expected, f"step {step}"


async def test_a_reader_in_the_middle_of_another_ones_read_sees_the_whole_cluster(
    app: FastAPI, api: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A round reads a cluster whole and yields the event loop in the middle (its first turn,
    before any node is counted); a preview reads the view then: it waits for the round's
    read rather than see a view that claims nodes not yet in it. (On SQLite's one connection
    the second reader waits for the first one's transaction either way.)"""
    await create_cluster(api, "east")
    await api.put(
        "/api/v1/clusters/east/inventory", json=inventory("east", tors=3, nodes_per_tor=4)
    )
    take = loop_turns.Turns.take
    second: list[asyncio.Task[tuple[dict, dict]]] = []

    async def take_and_let_a_second_reader_run(turns: loop_turns.Turns) -> None:
        if not second:
            second.append(asyncio.create_task(_view_and_nodes(app)))
            await asyncio.wait(second, timeout=0.5)  # as far as it gets while the first waits
        await take(turns)

    monkeypatch.setattr(loop_turns.Turns, "take", take_and_let_a_second_reader_run)
    view, expected = await _view_and_nodes(app)
    assert view == expected
    assert second, "the first reader took no turn while it read the cluster whole"
    view, expected = await second[0]
    assert view == expected


@pytest.mark.parametrize("read", ["whole", "from the log"])
async def test_a_refresh_cut_off_half_way_leaves_the_view_behind_not_wrong(
    app: FastAPI, api: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch, read: str
) -> None:
    """The refresh fails at its first turn (a cancelled round, a database gone): the next one
    still finds every node, whether the view was being read whole or from the log."""
    await create_cluster(api, "east")
    nodes = inventory("east", tors=3, nodes_per_tor=4)["nodes"]
    await api.put(
        "/api/v1/clusters/east/inventory", json=inventory("east", tors=3, nodes_per_tor=4)
    )
    if read == "from the log":
        await _view_and_nodes(app)
        await _delta(app, [nodes[0] | {"gpuUsed": 5}])
    take = loop_turns.Turns.take

    async def cut_off(turns: loop_turns.Turns) -> None:
        raise RuntimeError("cut off")

    monkeypatch.setattr(loop_turns.Turns, "take", cut_off)
    with pytest.raises(RuntimeError, match="cut off"):
        await _view_and_nodes(app)
    monkeypatch.setattr(loop_turns.Turns, "take", take)
    view, expected = await _view_and_nodes(app)
    assert view == expected


async def test_the_views_nodes_are_not_walked_by_the_garbage_collector(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    """A node's entry holds ints only, so a full collection stops tracking it, and each leaf's
    key is kept once: with 100,000 nodes, entries holding their own domain ids were half the
    objects each full collection of the scheduling replica walked. Read whole, then through
    the log (whose ids arrive as text)."""
    await create_cluster(api, "east")
    nodes = inventory("east", tors=3, nodes_per_tor=4)["nodes"]
    await api.put(
        "/api/v1/clusters/east/inventory", json=inventory("east", tors=3, nodes_per_tor=4)
    )
    read_whole = None
    for step in ("whole", "log"):
        view, expected = await _view_and_nodes(app)
        assert view == expected
        kept = capacity_view._views[await _east_id(app)]
        read_whole = read_whole or kept
        assert kept is read_whole, "the delta was read whole, not through the log"
        gc.collect()
        assert len(kept.nodes) == len(nodes), step
        assert not any(gc.is_tracked(entry) for entry in kept.nodes.values()), step
        shared = {id(key) for key in kept.keys}
        assert len(kept.hists) == 3 and all(id(key) in shared for key in kept.hists), step
        if step == "whole":
            await _delta(app, [node | {"gpuUsed": 1} for node in nodes])
