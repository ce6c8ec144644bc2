"""The node counts the cluster list shows are kept by the inventory's writes (snapshot PUT,
deltas alone or together, a HyperNode change) and stay what counting the nodes gives."""

from __future__ import annotations

import asyncio
import random

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import case, func, select, update

from tests.factories import REPLY_S, create_cluster, eventually, inventory, waiting_for_locks
from volcano_global.db.engine import transaction
from volcano_global.db.models import Cluster, Node, NodeUse
from volcano_global.schemas.clusters import InventoryDelta
from volcano_global.services.inventory.agent_streams import claim_stream
from volcano_global.services.inventory.clusters import get_cluster, lock_cluster, lock_clusters
from volcano_global.services.inventory.deltas import ClusterDelta, apply_delta, apply_node_deltas
from volcano_global.services.inventory.node_values import checked_delta


async def _listed_and_counted(app: FastAPI, api: httpx.AsyncClient) -> tuple[dict, dict]:
    """(name -> (total, ready) as GET /clusters lists them, the same counted from the nodes)"""
    listed = {}
    for query in ("", "?limit=1"):  # every cluster, and one page at a time
        url = f"/api/v1/clusters{query}"
        while url:
            body = (await api.get(url)).json()
            for c in body["items"]:
                listed[c["name"]] = (c["nodes"]["total"], c["nodes"]["ready"])
            token = body["metadata"].get("continue")
            url = f"/api/v1/clusters?limit=1&continue={token}" if query and token else ""
    async with transaction(app.state.sessions) as session:
        rows = await session.execute(
            select(Cluster.name, func.count(Node.id), func.sum(case((Node.ready, 1), else_=0)))
            .outerjoin(Node, Node.cluster_id == Cluster.id)
            .group_by(Cluster.name)
        )
        counted = {name: (total, int(ready or 0)) for name, total, ready in rows}
    return listed, counted


def _random_delta(rng: random.Random, nodes: dict[str, dict], step: int) -> dict:
    """Changes of readiness, new nodes (one without GPUs), removals; `nodes` follows it."""
    upserts: dict[str, dict] = {}
    for name in rng.sample(sorted(nodes), min(3, len(nodes))):
        upserts[name] = nodes[name] | {"ready": rng.random() > 0.4}
    template = next(iter(nodes.values()))
    for n in range(rng.randrange(3)):
        name = f"new-{step}-{n}"
        gpus = rng.choice([0, 8])
        upserts[name] = template | {
            "name": name,
            "gpuAllocatable": gpus,
            "ready": rng.random() > 0.3,
        }
    removals = [n for n in rng.sample(sorted(nodes), 2) if n not in upserts]
    for name in removals:
        del nodes[name]
    nodes.update(upserts)
    return {"nodeUpserts": list(upserts.values()), "nodeRemovals": removals}


async def test_node_counts_stay_exact_through_snapshots_and_deltas(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    nodes: dict[str, dict[str, dict]] = {}
    for name in ("east", "west", "empty"):
        await create_cluster(api, name)
    for name in ("east", "west"):
        base = inventory(name, tors=2, nodes_per_tor=5)
        base["nodes"][0]["ready"] = False
        assert (await api.put(f"/api/v1/clusters/{name}/inventory", json=base)).status_code == 200
        nodes[name] = {n["name"]: n for n in base["nodes"]}
    listed, counted = await _listed_and_counted(app, api)
    assert listed == counted == {"east": (10, 9), "west": (10, 9), "empty": (0, 0)}
    rng = random.Random(11)
    for step in range(15):
        async with transaction(app.state.sessions) as session:
            if step % 3 == 0:  # one cluster's delta on its own
                cluster = await lock_cluster(session, name="east")
                delta = InventoryDelta.model_validate(_random_delta(rng, nodes["east"], step))
                await apply_delta(session, cluster=cluster, delta=delta, seq=step + 2)
            else:  # both together, as the group commit of agents' deltas applies them
                clusters = await lock_clusters(session, names=["west", "east"])
                together = [
                    ClusterDelta(
                        cluster,
                        checked_delta(
                            InventoryDelta.model_validate(_random_delta(rng, nodes[name], step))
                        ),
                        step + 2,
                    )
                    for name, cluster in clusters.items()
                ]
                await apply_node_deltas(session, together)
        listed, counted = await _listed_and_counted(app, api)
        assert listed == counted, f"step {step}"
        assert counted["east"][0] == len(nodes["east"]), f"step {step}"
    # A HyperNode change re-reads the inventory as a snapshot: the counts with it.
    async with transaction(app.state.sessions) as session:
        cluster = await lock_cluster(session, name="east")
        delta = InventoryDelta.model_validate(
            {"domainRemovals": ["east-tor1"], "nodeRemovals": [sorted(nodes["east"])[0]]}
        )
        await apply_delta(session, cluster=cluster, delta=delta, seq=100)
    listed, counted = await _listed_and_counted(app, api)
    assert listed == counted
    assert listed["east"][0] == len(nodes["east"]) - 1
    # A smaller snapshot PUT replaces the counts.
    small = inventory("west", tors=1, nodes_per_tor=3)
    assert (await api.put("/api/v1/clusters/west/inventory", json=small)).status_code == 200
    listed, counted = await _listed_and_counted(app, api)
    assert listed == counted
    assert listed["west"] == (3, 3)


async def test_a_new_stream_counts_the_nodes_again(app: FastAPI, api: httpx.AsyncClient) -> None:
    """Counts a writer left wrong (a replica of the release before the counts, applying a
    delta during a roll-out) are the truth again once the cluster's agent stream is claimed:
    the writes after it only add differences to them."""
    await create_cluster(api, "east")
    base = inventory("east", tors=2, nodes_per_tor=5)
    base["nodes"][0]["ready"] = False
    assert (await api.put("/api/v1/clusters/east/inventory", json=base)).status_code == 200
    async with transaction(app.state.sessions) as session:
        await session.execute(update(Cluster).values(nodes_total=3, nodes_ready=1))
    listed, counted = await _listed_and_counted(app, api)
    assert listed != counted
    async with transaction(app.state.sessions) as session:
        cluster = await lock_cluster(session, name="east")
        await claim_stream(session, cluster=cluster, token_hash=None)
    listed, counted = await _listed_and_counted(app, api)
    assert listed == counted == {"east": (10, 9)}


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)  # row locks
async def test_a_stream_claimed_while_a_write_holds_the_cluster_counts_what_it_wrote(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    """The claim waits for the cluster's row, then counts: a node the holder added is
    counted (counted in the UPDATE that waited, Postgres read the nodes as they were)."""
    await create_cluster(api, "east")
    base = inventory("east", tors=1, nodes_per_tor=4)
    assert (await api.put("/api/v1/clusters/east/inventory", json=base)).status_code == 200

    async def claim() -> None:
        async with transaction(app.state.sessions) as session:
            cluster = await get_cluster(session, name="east")
            await claim_stream(session, cluster=cluster, token_hash=None)

    async with transaction(app.state.sessions) as holder:
        cluster = await lock_cluster(holder, name="east")
        extra = (await holder.execute(select(Node).where(Node.cluster_id == cluster.id))).scalars()
        template = next(iter(extra))
        holder.add(Node(cluster_id=cluster.id, name="late", domain_id=template.domain_id))
        holder.add(NodeUse(cluster_id=cluster.id, name="late"))  # as every writer of nodes does
        await holder.flush()
        claiming = asyncio.create_task(claim())
        await eventually(lambda: waiting_for_locks(app))
    await asyncio.wait_for(claiming, REPLY_S)
    listed, counted = await _listed_and_counted(app, api)
    assert listed == counted == {"east": (5, 5)}
