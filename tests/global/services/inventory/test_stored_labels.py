"""A node's labels and taints are stored as the same text whichever path wrote them (SQLite and
Postgres): an agent's full sync and the REST inventory (bulk inserts, `db/copy_rows.py`), an
agent's delta (Core insert and update) and the ORM. On SQLite the bulk path wrote compact
UTF-8 and the others `json.dumps`' spaced, ASCII-escaped text; rows of before read the same."""

from __future__ import annotations

from typing import Any

import httpx
from fastapi import FastAPI
from sqlalchemy import String, cast, select

from tests.factories import create_cluster, inventory
from tests.grpc_stream import Stream, node
from volcano_global.db.engine import transaction
from volcano_global.db.models import Cluster, Node, NodeUse
from volcano_global.rpc.v1 import agent_pb2 as pb

LABELS = {"zone": "zürich-1", "b": "1", "topology.kubernetes.io/region": "eu"}  # not in order
TAINTS = [
    {"key": "gpu", "value": "h100", "effect": "NoSchedule"},
    {"key": "drain", "value": None, "effect": "NoExecute"},
]
# SQLite's one form (db/json_text.py): compact, UTF-8, keys sorted.
CANONICAL = '{"b":"1","topology.kubernetes.io/region":"eu","zone":"zürich-1"}'


def _labelled(name: str) -> pb.Node:
    message = node(name, domain="gpu-east-tor0")
    for key in reversed(LABELS):  # another order than the REST body's
        message.labels[key] = LABELS[key]
    for taint in TAINTS:
        message.taints.append(
            pb.Taint(key=taint["key"], value=taint["value"] or "", effect=taint["effect"])
        )
    return message


async def _stored(app: FastAPI) -> dict[tuple[str, str], tuple[Any, ...]]:
    """(cluster, node) -> the labels and taints as stored text, and as the ORM reads them."""
    columns = (cast(Node.labels, String), cast(Node.taints, String), Node.labels, Node.taints)
    query = select(Cluster.name, Node.name, *columns).join(Cluster, Node.cluster_id == Cluster.id)
    async with transaction(app.state.sessions) as session:
        rows = (await session.execute(query)).all()
    return {(c, n): tuple(rest) for c, n, *rest in rows}


async def test_every_write_path_stores_the_same_text(app: FastAPI, api: httpx.AsyncClient) -> None:
    token = (await create_cluster(api, "gpu-east"))["agentToken"]
    await create_cluster(api, "gpu-west")
    body = inventory("gpu-west", tors=1, nodes_per_tor=1)
    body["nodes"][0] |= {"name": "rest", "labels": LABELS, "taints": TAINTS}
    response = await api.put("/api/v1/clusters/gpu-west/inventory", json=body)
    assert response.status_code == 200, response.text

    stream = Stream(app, token)
    await stream.hello()
    domains = [pb.Domain(name="gpu-east-spine", tier=2)]
    domains.append(pb.Domain(name="gpu-east-tor0", tier=1, parent="gpu-east-spine"))
    full_sync = pb.InventorySnapshot(seq=1, domains=domains, nodes=[_labelled("sync")])
    full_sync.nodes.append(node("updated", domain="gpu-east-tor0"))
    assert (await stream.send(pb.AgentMessage(snapshot=full_sync))).ack.seq == 1
    delta = pb.InventoryDelta(seq=2, node_upserts=[_labelled("inserted"), _labelled("updated")])
    assert (await stream.send(pb.AgentMessage(delta=delta))).ack.seq == 2
    await stream.close()

    async with transaction(app.state.sessions) as session:
        west = (
            await session.execute(select(Cluster).where(Cluster.name == "gpu-west"))
        ).scalar_one()
        session.add(Node(cluster_id=west.id, name="orm", labels=dict(LABELS), taints=list(TAINTS)))
        session.add(NodeUse(cluster_id=west.id, name="orm"))

    stored = await _stored(app)
    paths = [("gpu-west", "rest"), ("gpu-east", "sync"), ("gpu-east", "inserted")]
    paths += [("gpu-east", "updated"), ("gpu-west", "orm")]
    first = stored[paths[0]]
    for path in paths[1:]:
        assert stored[path] == first, path
    assert first[2] == LABELS and first[3] == TAINTS
    if app.state.engine.dialect.name == "sqlite":
        assert first[0] == CANONICAL


async def test_labels_stored_in_the_former_text_read_the_same(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    """A row written before (SQLite: `json.dumps`' spaced, escaped text, in the source's order)
    reads as the same labels, and the next snapshot stores it in the one form."""
    await create_cluster(api, "gpu-west")
    body = inventory("gpu-west", tors=1, nodes_per_tor=1)
    body["nodes"][0] |= {"name": "rest", "labels": LABELS, "taints": TAINTS}
    assert (await api.put("/api/v1/clusters/gpu-west/inventory", json=body)).status_code == 200
    if app.state.engine.dialect.name == "sqlite":
        former = '{"zone": "z\\u00fcrich-1", "b": "1", "topology.kubernetes.io/region": "eu"}'
        async with app.state.engine.begin() as connection:
            await connection.exec_driver_sql("UPDATE nodes SET labels = ?", (former,))
    (row,) = (await _stored(app)).values()
    assert row[2] == LABELS

    assert (await api.put("/api/v1/clusters/gpu-west/inventory", json=body)).status_code == 200
    (again,) = (await _stored(app)).values()
    assert again[2] == LABELS
    if app.state.engine.dialect.name == "sqlite":
        assert again[0] == CANONICAL
