"""A cluster's topology read one level at a time (the console's tree: `top`, `parent=`, or
whole) gives what the former computation gave: every node of the cluster read and walked up
its domains per request, its GPUs counted there by the rule the aggregates follow (total: a
node's allocatable GPUs; free: its unused ones on a ready, schedulable node; a node without a
model under "unknown"). Random trees of three tiers, nodes in leaves and in inner domains,
without a domain or GPUs, some not ready or cordoned; after a snapshot and after deltas that
move nodes between domains, change their model, size and use, flip readiness and remove them."""

from __future__ import annotations

import random
import uuid
from collections import Counter, defaultdict
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from tests.factories import create_cluster
from volcano_global.db.engine import transaction
from volcano_global.db.models import NODE_USE, Cluster, Node, NodeUse, TopologyDomain
from volcano_global.errors import NotFound
from volcano_global.schemas.clusters import InventoryDelta
from volcano_global.services.inventory.clusters import get_cluster, lock_cluster
from volcano_global.services.inventory.deltas import apply_delta
from volcano_global.services.inventory.fleet_views import topology_level


async def _former(session: AsyncSession, cluster: Cluster) -> list[tuple[Any, ...]]:
    """The whole tree as the route computed it before (reading each node), as tuples:
    (name, tier, tier name, parent, capacity, nodes, not ready names sorted, children)."""
    domains = list(
        (
            await session.execute(
                select(TopologyDomain)
                .where(TopologyDomain.cluster_id == cluster.id)
                .order_by(TopologyDomain.tier.desc(), TopologyDomain.name)
            )
        ).scalars()
    )
    by_id = {d.id: d for d in domains}
    gpus: dict[uuid.UUID, Counter] = defaultdict(Counter)  # domain -> (model, total|free) -> n
    counts: Counter = Counter()
    not_ready: dict[uuid.UUID, list[str]] = defaultdict(list)
    nodes = await session.execute(
        select(Node, NodeUse).join(NodeUse, NODE_USE).where(Node.cluster_id == cluster.id)
    )
    for node, use in nodes:
        domain_id = node.domain_id
        while domain_id is not None and domain_id in by_id:
            counts[domain_id] += 1
            if not node.ready:
                not_ready[domain_id].append(node.name)
            if node.gpu_allocatable:
                model = node.gpu_model or "unknown"
                gpus[domain_id][model, "total"] += node.gpu_allocatable
                if node.ready and node.schedulable:
                    gpus[domain_id][model, "free"] += node.gpu_allocatable - use.gpu_used
            domain_id = by_id[domain_id].parent_id
    capacity = {
        domain_id: {m: (sums[m, "total"], sums[m, "free"]) for m, part in sums if part == "total"}
        for domain_id, sums in gpus.items()
    }
    children = Counter(d.parent_id for d in domains if d.parent_id in by_id)
    return [
        (
            d.name,
            d.tier,
            d.tier_name,
            by_id[d.parent_id].name if d.parent_id in by_id else None,
            capacity.get(d.id, {}),
            counts[d.id],
            sorted(not_ready[d.id]),
            children[d.id],
        )
        for d in domains
    ]


async def _levels(app: FastAPI, name: str) -> tuple[dict, dict]:
    """(level -> what topology_level gives, level -> the same cut from the former whole tree):
    levels are None (whole), "top" and each domain's name (its children)."""
    async with transaction(app.state.sessions) as session:
        cluster = await get_cluster(session, name=name)
        former = await _former(session, cluster)
        got, expected = {}, {}
        for level in [None, "top", *(row[0] for row in former)]:
            top, parent = level == "top", (level if level not in (None, "top") else None)
            views = await topology_level(session, cluster=cluster, parent=parent, top=top)
            got[level] = [
                (
                    d.name,
                    d.tier,
                    d.tier_name,
                    d.parent,
                    d.capacity,
                    d.nodes,
                    sorted(d.nodes_not_ready),
                    children,
                )
                for d, children in views
            ]
            expected[level] = [
                row
                for row in former
                if level is None or (row[3] is None if top else row[3] == parent)
            ]
    return got, expected


def _random_inventory(rng: random.Random) -> tuple[dict[str, Any], list[str]]:
    domains: list[dict[str, Any]] = []
    for s in range(rng.randrange(1, 4)):
        domains.append({"name": f"spine{s}", "tier": 3, "tierName": "spine"})
        for a in range(rng.randrange(1, 4)):
            agg = f"agg{s}-{a}"
            domains.append({"name": agg, "tier": 2, "tierName": "agg", "parent": f"spine{s}"})
            for t in range(rng.randrange(0, 4)):
                domains.append({"name": f"tor{s}-{a}-{t}", "tier": 1, "parent": agg})
    domains.append({"name": "lone", "tier": 1})  # a top domain of the lowest tier
    names = [d["name"] for d in domains]
    nodes = [_node(rng, f"n{i:03d}", names) for i in range(rng.randrange(20, 80))]
    return {"domains": domains, "nodes": nodes}, names


def _node(rng: random.Random, name: str, domains: list[str]) -> dict[str, Any]:
    gpus = rng.choice([0, 4, 8, 8])
    return {
        "name": name,
        "gpuModel": rng.choice(["H100", "A100", None]),
        "gpuAllocatable": gpus,
        "gpuUsed": rng.randrange(gpus + 1),
        "ready": rng.random() > 0.3,
        "schedulable": rng.random() > 0.2,
        "domain": rng.choice([*domains, None]),
    }


async def test_levels_equal_the_former_whole_tree_computation(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    rng = random.Random(7)
    for round_ in range(4):
        name = f"c{round_}"
        await create_cluster(api, name)
        body, domains = _random_inventory(rng)
        assert (await api.put(f"/api/v1/clusters/{name}/inventory", json=body)).status_code == 200
        got, expected = await _levels(app, name)
        assert got == expected, name
        nodes = {n["name"]: n for n in body["nodes"]}
        for step in range(3):  # deltas: moves, readiness, new and removed nodes
            upserts = [
                _node(rng, n, domains) for n in [*rng.sample(sorted(nodes), 5), f"new{step}"]
            ]
            removals = [
                n for n in rng.sample(sorted(nodes), 3) if n not in {u["name"] for u in upserts}
            ]
            async with transaction(app.state.sessions) as session:
                cluster = await lock_cluster(session, name=name)
                delta = InventoryDelta.model_validate(
                    {"nodeUpserts": upserts, "nodeRemovals": removals}
                )
                await apply_delta(session, cluster=cluster, delta=delta, seq=step + 1)
            for n in removals:
                del nodes[n]
            nodes.update({u["name"]: u for u in upserts})
            got, expected = await _levels(app, name)
            assert got == expected, (name, step)
    assert any(row[5] for rows in expected.values() for row in rows)  # nodes were counted
    whole = [row[4] for row in expected[None]]  # GPUs were: some free, some (not all) used
    assert any(0 < free < total for capacity in whole for total, free in capacity.values())


async def test_not_ready_names_are_capped_per_domain(app: FastAPI, api: httpx.AsyncClient) -> None:
    await create_cluster(api, "east")
    body = {
        "domains": [{"name": "spine", "tier": 2}, {"name": "tor", "tier": 1, "parent": "spine"}],
        "nodes": [
            {"name": f"n{i:02d}", "gpuAllocatable": 8, "ready": i % 2 == 0, "domain": "tor"}
            for i in range(30)
        ],
    }
    assert (await api.put("/api/v1/clusters/east/inventory", json=body)).status_code == 200
    async with transaction(app.state.sessions) as session:
        cluster = await get_cluster(session, name="east")
        ((view, children),) = await topology_level(
            session, cluster=cluster, parent=None, top=True, max_listed=4
        )
    assert (view.name, view.nodes, children) == ("spine", 30, 1)
    assert view.nodes_not_ready == ["n01", "n03", "n05", "n07"]


async def test_a_cluster_deleted_while_its_level_is_read_is_not_found(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    """The caller read the cluster, then it was deleted: 404's error, not a KeyError (500)."""
    await create_cluster(api, "gone")
    async with transaction(app.state.sessions) as session:
        cluster = await get_cluster(session, name="gone")
    assert (await api.delete("/api/v1/clusters/gone")).status_code == 204
    async with transaction(app.state.sessions) as session:
        with pytest.raises(NotFound, match="cluster 'gone' not found"):
            await topology_level(session, cluster=cluster, parent=None, top=True)
