"""Inventory deltas keep the per-cluster GPU aggregates equal to what the stored nodes add up to
(SQLite and Postgres), through new nodes, new GPU models, removals and flips (per domain nothing
is kept: tests/global/services/inventory/test_topology_levels.py checks the view's sums)."""

from __future__ import annotations

import random
from collections import Counter, defaultdict

import httpx
from fastapi import FastAPI
from sqlalchemy import select

from tests.factories import create_cluster, inventory
from volcano_global.db.engine import transaction
from volcano_global.db.models import NODE_USE, Cluster, ClusterGpuCapacity, Node, NodeUse
from volcano_global.schemas.clusters import InventoryDelta
from volcano_global.services.inventory.clusters import lock_cluster, lock_clusters
from volcano_global.services.inventory.deltas import (
    ClusterDelta,
    apply_delta,
    apply_node_deltas,
    merged,
)
from volcano_global.services.inventory.domain_trees import domain_trees
from volcano_global.services.inventory.node_values import CheckedDelta, checked_delta
from volcano_global.services.inventory.snapshots import contribution
from volcano_global.services.scheduling.capacity_view import (
    free_histograms,
    free_states,
    solver_state,
)


async def _aggregates(app: FastAPI) -> tuple[Counter, Counter]:
    """(stored, recomputed from the nodes): (cluster, model, total|free) -> GPUs."""
    async with transaction(app.state.sessions) as session:
        expected: Counter = Counter()
        for node, use in await session.execute(select(Node, NodeUse).join(NodeUse, NODE_USE)):
            part = contribution(
                gpu_model=node.gpu_model,
                gpu_allocatable=node.gpu_allocatable,
                gpu_used=use.gpu_used,
                ready=node.ready,
                schedulable=node.schedulable,
            )
            if part is None:
                continue
            model, total, free = part
            expected[(node.cluster_id, model, "total")] += total
            expected[(node.cluster_id, model, "free")] += free
        stored: Counter = Counter()
        for row in (await session.execute(select(ClusterGpuCapacity))).scalars():
            stored[(row.cluster_id, row.gpu_model, "total")] += row.total_gpus
            stored[(row.cluster_id, row.gpu_model, "free")] += row.free_gpus
    return +stored, +expected


async def _histograms(app: FastAPI) -> tuple[dict, dict]:
    """(the scheduler's incremental view, recomputed from the nodes): leaf histograms."""
    async with transaction(app.state.sessions) as session:
        clusters = list((await session.execute(select(Cluster).order_by(Cluster.name))).scalars())
        view = await free_histograms(session, clusters)
        recomputed: dict = {c.id: defaultdict(lambda: [0] * 9) for c in clusters}
        for node, use in await session.execute(select(Node, NodeUse).join(NodeUse, NODE_USE)):
            if node.ready and node.schedulable and node.gpu_allocatable > 0:
                hist = recomputed[node.cluster_id][(node.domain_id, node.gpu_model or "unknown")]
                hist[max(node.gpu_allocatable - use.gpu_used, 0)] += 1
    return view, {cid: {key: tuple(h) for key, h in per.items()} for cid, per in recomputed.items()}


async def test_random_deltas_keep_the_aggregates_exact(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    await create_cluster(api, "east")
    base = inventory("east", tors=3, nodes_per_tor=4)
    await api.put("/api/v1/clusters/east/inventory", json=base)
    await create_cluster(api, "west")
    await api.put("/api/v1/clusters/west/inventory", json=inventory("west", tors=2))
    west = (await _states(app, {}))[0]["west"]
    # Nodes of 8 GPUs each: the scheduler's input knows the leaves' node size (reservations
    # cap a gang by the shape of the cluster with it).
    assert {leaf.node_gpus for leaf in west.leaves} == {8}
    nodes = {n["name"]: n for n in base["nodes"]}
    tors = [d["name"] for d in base["domains"] if d["tier"] == 1]
    rng = random.Random(3)
    for step in range(30):
        upserts, removals = [], []
        for _ in range(rng.randrange(1, 6)):
            name = rng.choice([*nodes, f"new-{step}"])
            if rng.random() < 0.15 and name in nodes and name not in upserts:
                removals.append(name)
                continue
            node = dict(nodes.get(name) or {**base["nodes"][0], "name": name})
            size = rng.choice([8, 8, 8, 4])  # a leaf of mixed node sizes has no known size
            node |= {
                "gpuAllocatable": size,
                "gpuUsed": rng.randrange(size + 1),
                "ready": rng.random() > 0.2,
                "gpuModel": rng.choice(["H100", "H100", "A100"]),
                "domain": rng.choice(tors),
            }
            upserts = [u for u in upserts if u["name"] != name] + [node]
        removals = [r for r in removals if r not in {u["name"] for u in upserts}]
        usages = _usages(rng, nodes, named={u["name"] for u in upserts} | set(removals))
        async with transaction(app.state.sessions) as session:
            cluster = await lock_cluster(session, name="east")
            delta = InventoryDelta.model_validate(
                {"nodeUpserts": upserts, "nodeRemovals": removals, "nodeUsages": usages}
            )
            await apply_delta(session, cluster=cluster, delta=delta, seq=cluster.inventory_seq + 1)
        for name in removals:
            nodes.pop(name)
        nodes.update({u["name"]: u for u in upserts})
        nodes.update({u["name"]: nodes[u["name"]] | u for u in usages})
        stored, expected = await _aggregates(app)
        assert stored == expected, f"step {step}"
        view, recomputed = await _histograms(app)
        assert view == recomputed, f"step {step}"
        states, expected_states = await _states(app, recomputed)
        assert states["east"] == expected_states["east"], f"step {step}"
        assert states["west"] is west  # unchanged: the cached solver input, not rebuilt


def _usages(rng: random.Random, nodes: dict[str, dict], *, named: set[str]) -> list[dict]:
    """New usages of up to three stored nodes the delta names nowhere else."""
    others = sorted(set(nodes) - named)
    return [
        {
            "name": name,
            "gpuUsed": rng.randrange(nodes[name].get("gpuAllocatable", 0) + 1),
            "cpuUsedMillis": rng.randrange(1000),
            "memoryUsedBytes": rng.randrange(1 << 30),
        }
        for name in rng.sample(others, min(3, len(others)))
    ]


async def _states(app: FastAPI, recomputed: dict) -> tuple[dict, dict]:
    """(the solver input the scheduler assembles per cluster name, the same from `recomputed`)"""
    async with transaction(app.state.sessions) as session:
        clusters = list((await session.execute(select(Cluster))).scalars())
        trees = await domain_trees(session, {c.id: c.inventory_generation for c in clusters})
        states = await free_states(session, clusters, trees)
        sizes: dict = defaultdict(lambda: defaultdict(set))
        for node in (await session.execute(select(Node))).scalars():
            if node.ready and node.schedulable and node.gpu_allocatable > 0:
                key = (node.domain_id, node.gpu_model or "unknown")
                sizes[node.cluster_id][key].add(node.gpu_allocatable)
    node_gpus = {
        cid: {key: next(iter(found)) if len(found) == 1 else 0 for key, found in per.items()}
        for cid, per in sizes.items()
    }
    return (
        {c.name: states[c.id] for c in clusters},
        {
            c.name: solver_state(c.name, recomputed.get(c.id, {}), trees[c.id], node_gpus.get(c.id))
            for c in clusters
        },
    )


def test_merged_deltas_keep_each_nodes_last_change() -> None:
    def delta(**fields: object) -> CheckedDelta:
        return checked_delta(InventoryDelta.model_validate(fields))

    node = inventory("east")["nodes"][0]
    a, b = node | {"name": "a"}, node | {"name": "b"}
    runs = merged(
        [
            delta(nodeUpserts=[a], nodeRemovals=["b"]),
            delta(nodeUpserts=[b | {"gpuUsed": 3}], nodeRemovals=["a"]),
            delta(nodeUpserts=[b | {"gpuUsed": 5}]),
            delta(domainUpserts=[{"name": "tor9", "tier": 1}]),
            delta(nodeRemovals=["b"], nodeUpserts=[a]),
        ]
    )
    assert len(runs) == 3
    first, domains, last = runs
    assert [(n.name, n.gpu_used) for n in first.node_upserts] == [("b", 5)]
    assert first.node_removals == ["a"]
    assert [d.name for d in domains.domain_upserts] == ["tor9"]
    assert [n.name for n in last.node_upserts] == ["a"]
    assert last.node_removals == ["b"]


ODD_NAMES = ("", ' "quoted" ', "\\back\\slash", "'single'", "é✓ 😀", "\t[1,2]{}")


async def test_node_deltas_of_several_clusters_together_keep_the_aggregates_exact(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    """Deltas of two clusters applied together (one read, one UPDATE: the group commit of
    agents' deltas) leave each cluster's nodes and aggregates exact, through changes, new
    nodes and removals; the clusters' nodes have the same names, some of them with characters
    that need quoting or escaping (Postgres reads and updates them as array elements)."""
    nodes: dict[str, dict] = {}
    for name in ("east", "west"):
        await create_cluster(api, name)
        base = inventory(name, tors=2, nodes_per_tor=4)
        for i, node in enumerate(base["nodes"]):
            node["name"] = node["name"].removeprefix(f"{name}-") + ODD_NAMES[i % len(ODD_NAMES)]
        await api.put(f"/api/v1/clusters/{name}/inventory", json=base)
        nodes[name] = {n["name"]: n for n in base["nodes"]}
    rng = random.Random(5)
    for step in range(12):
        async with transaction(app.state.sessions) as session:
            clusters = await lock_clusters(session, names=["west", "east"])
            together = []
            for name, cluster in clusters.items():
                upserts = []
                picked = rng.sample(sorted(nodes[name]), 4)
                for node in (nodes[name][n] for n in picked[:3]):
                    upserts.append(
                        node | {"gpuUsed": rng.randrange(9), "ready": rng.random() > 0.2}
                    )
                upserts.append({**upserts[0], "name": f"new-{step}"})
                removals = picked[3:]
                named = {u["name"] for u in upserts} | set(removals)
                usages = _usages(rng, nodes[name], named=named)
                delta = InventoryDelta.model_validate(
                    {"nodeUpserts": upserts, "nodeRemovals": removals, "nodeUsages": usages}
                )
                together.append(ClusterDelta(cluster, checked_delta(delta), step + 2))
                nodes[name].update({u["name"]: u for u in upserts})
                nodes[name].update({u["name"]: nodes[name][u["name"]] | u for u in usages})
                del nodes[name][picked[3]]
            await apply_node_deltas(session, together)
        async with transaction(app.state.sessions) as session:
            stored_nodes = {
                (c, n): used
                for c, n, used in await session.execute(
                    select(Cluster.name, NodeUse.name, NodeUse.gpu_used)
                    .select_from(NodeUse)
                    .join(Cluster, Cluster.id == NodeUse.cluster_id)
                )
            }
        assert stored_nodes == {
            (c, n): node["gpuUsed"] for c, per in nodes.items() for n, node in per.items()
        }, f"step {step}"
        stored, expected = await _aggregates(app)
        assert stored == expected, f"step {step}"
        view, recomputed = await _histograms(app)
        assert view == recomputed, f"step {step}"
