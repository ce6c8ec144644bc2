"""The delta writer's read of the nodes a delta names (services/inventory/stored_nodes.py): on
SQLite one statement for every cluster (the pairs as one JSON parameter), on both databases the
same values and Python types an ORM read of the nodes gives, for names JSON and SQL escape."""

from __future__ import annotations

from typing import Any

import httpx
from fastapi import FastAPI
from sqlalchemy import event, select

from tests.factories import create_cluster, inventory
from volcano_global.db.engine import transaction
from volcano_global.db.models import NODE_USE, Cluster, Node, NodeUse
from volcano_global.services.inventory.snapshots import NODE_CAPACITY_COLUMNS
from volcano_global.services.inventory.stored_nodes import stored_nodes

COLUMNS = (Node.name, *NODE_CAPACITY_COLUMNS)  # what the delta writer reads of a node
ODD_NAMES = ('n "quoted"', "n\\back\\slash", "n'single'", "n é✓ 😀", "n\t[1,2]{}", "n?,->>0")


def _odd_inventory(cluster: str) -> dict:
    document = inventory(cluster, tors=2, nodes_per_tor=4)
    for i, node in enumerate(document["nodes"]):
        node["name"] = f"{cluster}-{i}-{ODD_NAMES[i % len(ODD_NAMES)]}"
    document["nodes"][0] |= {"ready": False, "gpuUsed": 3}
    document["nodes"][1] |= {"schedulable": False, "gpuModel": None, "gpuAllocatable": 0}
    document["nodes"][2].pop("domain")
    return document


def _value(node_and_use: tuple[Node, NodeUse], column: Any) -> Any:
    """The column's value in the node's row or in its usage's."""
    node, use = node_and_use
    return getattr(use if column.table is NodeUse.__table__ else node, column.key)


async def test_the_named_nodes_of_several_clusters_in_one_statement(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    for name in ("east", "west", "idle"):
        await create_cluster(api, name)
        response = await api.put(f"/api/v1/clusters/{name}/inventory", json=_odd_inventory(name))
        assert response.status_code == 200, response.text
    async with transaction(app.state.sessions) as session:
        clusters = {c.name: c for c in (await session.execute(select(Cluster))).scalars()}
        both = select(Node, NodeUse).join(NodeUse, NODE_USE)
        stored = {(n.cluster_id, n.name): (n, u) for n, u in await session.execute(both)}
    east, west = clusters["east"].id, clusters["west"].id
    wanted = {
        east: [n for c, n in stored if c == east] + ["east-missing"],
        west: [*[n for c, n in stored if c == west][:3], "east-0-" + ODD_NAMES[0]],
    }
    statements: list[str] = []
    engine = app.state.engine.sync_engine
    listener = lambda *args: statements.append(args[2])  # noqa: E731
    event.listen(engine, "before_cursor_execute", listener)
    try:
        async with transaction(app.state.sessions) as session:
            found = await stored_nodes(session, wanted)
    finally:
        event.remove(engine, "before_cursor_execute", listener)
    if engine.dialect.name == "sqlite":  # Postgres' read runs on asyncpg, unseen here
        assert len(statements) == 1, statements
    expected = {
        cluster_id: {
            name: {c.key: _value(stored[(cluster_id, name)], c) for c in COLUMNS}
            for name in names
            if (cluster_id, name) in stored
        }
        for cluster_id, names in wanted.items()
    }
    keys = [c.key for c in COLUMNS]  # Postgres' records also hold the cluster's index ("run")
    read = {c: {n: {k: r[k] for k in keys} for n, r in rows.items()} for c, rows in found.items()}
    assert read == expected
    assert len(expected[east]) == 8 and len(expected[west]) == 3
    for rows in found.values():
        for row in rows.values():
            assert type(row["ready"]) is bool and type(row["schedulable"]) is bool
