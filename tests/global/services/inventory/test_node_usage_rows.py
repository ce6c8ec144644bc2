"""Every stored node has exactly one `node_usages` row, holding what its pods use: written by a
snapshot and by a delta's new nodes, changed by usages and whole upserts, kept through a
HyperNode change's rebuild, removed with the node by a delta, by the next snapshot and with
its cluster (no foreign key does it: the
writers do; both databases)."""

from __future__ import annotations

import httpx
from fastapi import FastAPI
from sqlalchemy import select

from tests.factories import create_cluster, inventory, next_delta
from volcano_global.db.engine import transaction
from volcano_global.db.models import Node, NodeUse


async def _rows(app: FastAPI) -> tuple[set[str], dict[str, tuple[int, int, int]]]:
    """(the stored nodes' names, each usage row's name -> (GPUs, CPU, memory) used)"""
    async with transaction(app.state.sessions) as session:
        nodes = set((await session.execute(select(Node.name))).scalars())
        used = select(
            NodeUse.name, NodeUse.gpu_used, NodeUse.cpu_used_millis, NodeUse.memory_used_bytes
        )
        usages = {name: (g, c, m) for name, g, c, m in await session.execute(used)}
    return nodes, usages


async def test_each_node_has_one_usage_row_whatever_wrote_it(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    await create_cluster(api, "east")
    await create_cluster(api, "west")
    for name in ("east", "west"):
        shape = inventory(name, tors=1, nodes_per_tor=3, used=2)
        assert (await api.put(f"/api/v1/clusters/{name}/inventory", json=shape)).status_code == 200
    nodes, usages = await _rows(app)
    assert set(usages) == nodes and len(nodes) == 6
    assert usages["east-n0-0"] == (2, 0, 0)

    new = inventory("east", tors=1, nodes_per_tor=4)["nodes"][3] | {"gpuUsed": 5}
    whole = inventory("east", tors=1, nodes_per_tor=3)["nodes"][1] | {"cpuUsedMillis": 900}
    await next_delta(
        app,
        "east",
        {
            "nodeUpserts": [new, whole | {"gpuUsed": 1}],
            "nodeRemovals": ["east-n0-2"],
            "nodeUsages": [{"name": "east-n0-0", "gpuUsed": 7, "memoryUsedBytes": 1 << 30}],
        },
    )
    nodes, usages = await _rows(app)
    assert set(usages) == nodes
    assert "east-n0-2" not in usages
    assert usages["east-n0-3"] == (5, 0, 0)  # a new node's
    assert usages["east-n0-1"] == (1, 900, 0)  # a whole node's
    assert usages["east-n0-0"] == (7, 0, 1 << 30)  # a usage's

    tor = {"name": "east-tor9", "tier": 1, "parent": "east-spine"}
    await next_delta(app, "east", {"domainUpserts": [tor]})  # the inventory rebuilt
    assert await _rows(app) == (nodes, usages)  # what the pods use kept through it

    smaller = inventory("east", tors=1, nodes_per_tor=2)
    assert (await api.put("/api/v1/clusters/east/inventory", json=smaller)).status_code == 200
    nodes, usages = await _rows(app)
    assert set(usages) == nodes
    assert {n for n in nodes if n.startswith("east")} == {"east-n0-0", "east-n0-1"}
    assert usages["east-n0-0"] == (0, 0, 0)  # the snapshot's, not the delta's

    assert (await api.delete("/api/v1/clusters/east")).status_code == 204
    nodes, usages = await _rows(app)
    assert set(usages) == nodes == {"west-n0-0", "west-n0-1", "west-n0-2"}
