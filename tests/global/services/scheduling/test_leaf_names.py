"""A HyperNode named as its cluster: the server's solver input then holds two leaves of one
name (the HyperNode's and the nodes outside any HyperNode, named after the cluster), which
the solver's pool takes as one (`capacity._one_per_name`)."""

from __future__ import annotations

import httpx
from fastapi import FastAPI
from sqlalchemy import select

from tests.factories import create_cluster
from volcano_global.db.engine import transaction
from volcano_global.db.models import Cluster
from volcano_global.services.scheduling.free import free_capacity
from volcano_global.solver.capacity import ClusterPool
from volcano_global.solver.model import JobRequest


def _node(name: str, domain: str | None) -> dict:
    return {"name": name, "gpuModel": "H100", "gpuAllocatable": 8, "domain": domain}


async def test_a_hypernode_named_as_its_cluster_and_the_nodes_outside_it_place_as_one_leaf(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    await create_cluster(api, "east")
    body = {
        "domains": [{"name": "east", "tier": 1}],
        "nodes": [_node(f"{d or 'out'}-{i}", d) for d in ("east", None) for i in range(2)],
    }
    response = await api.put("/api/v1/clusters/east/inventory", json=body)
    assert response.status_code < 300, response.text
    async with transaction(app.state.sessions) as session:
        cluster = (await session.execute(select(Cluster))).scalar_one()
        (state,) = await free_capacity(session, [cluster])
    # The shape the pool used to break on: two H100 leaves both named "east".
    assert sorted(leaf.path for leaf in state.leaves) == [(), ("east",)]
    pool = ClusterPool(state)
    job = JobRequest(id="j", pods=3, gpus_per_pod=8, gpu_model="H100", unit_pods=1)
    assert pool.place(job, 3, "H100") == [("east", 3)]
    assert pool.take_from_leaf("east", "H100", 8, 2) == 1
