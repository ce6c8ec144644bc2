"""A node delta wakes the scheduling loop when it may let a waiting job be placed: free GPUs rose
on a node (freed, uncordoned, a new node), or a node with free GPUs moved to another domain
(the cluster's total is the same, the room is elsewhere). Decided per node: a node's GPUs
freed wake the loop even when another node takes as many in the same delta. GPUs only taken,
or a node's other columns changed, wake nothing (SQLite and Postgres)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.factories import create_cluster, inventory
from volcano_global.db.engine import transaction
from volcano_global.schemas.clusters import InventoryDelta
from volcano_global.services.inventory.clusters import lock_cluster
from volcano_global.services.inventory.deltas import apply_delta
from volcano_global.services.wakeups import FLEET, ROUNDS


@pytest.fixture
async def nodes(api: httpx.AsyncClient) -> dict[str, dict[str, Any]]:
    """east: two ToRs of two 8-GPU nodes, 4 GPUs used on each."""
    await create_cluster(api, "east")
    body = inventory("east", tors=2, nodes_per_tor=2, used=4)
    assert (await api.put("/api/v1/clusters/east/inventory", json=body)).status_code == 200
    return {n["name"]: n for n in body["nodes"]}


async def _wakes(app: FastAPI, upserts: list[dict[str, Any]], seq: int) -> bool:
    with ROUNDS.watch(FLEET) as woken:
        async with transaction(app.state.sessions) as session:
            cluster = await lock_cluster(session, name="east")
            delta = InventoryDelta.model_validate({"nodeUpserts": upserts})
            await apply_delta(session, cluster=cluster, delta=delta, seq=seq)
        return woken.is_set()


async def test_deltas_wake_the_loop_when_room_may_have_appeared(
    app: FastAPI, nodes: dict[str, dict[str, Any]]
) -> None:
    a, b, c = (nodes[f"east-n{t}-{n}"] for t, n in ((0, 0), (0, 1), (1, 0)))
    steps = [
        ("GPUs taken", [a | {"gpuUsed": 6}], False),
        ("CPU used, GPUs as they were", [a | {"gpuUsed": 6, "cpuUsedMillis": 1000}], False),
        ("GPUs freed", [a | {"gpuUsed": 2}], True),
        ("moved to the other ToR", [a | {"gpuUsed": 2, "domain": "east-tor1"}], True),
        ("cordoned", [b | {"schedulable": False}], False),
        ("uncordoned", [b], True),
        (
            "freed on one, taken on another of its ToR",
            [c | {"gpuUsed": 2}, a | {"gpuUsed": 4, "domain": "east-tor1"}],
            True,
        ),
        ("a new node with free GPUs", [a | {"name": "east-new", "gpuUsed": 0}], True),
        ("a new node, all GPUs used", [a | {"name": "east-full", "gpuUsed": 8}], False),
    ]
    woke = {
        what: await _wakes(app, upserts, seq) for seq, (what, upserts, _) in enumerate(steps, 2)
    }
    assert woke == {what: wakes for what, _, wakes in steps}
