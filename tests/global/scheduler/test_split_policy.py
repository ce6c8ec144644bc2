"""A HyperJob's `splitPolicy` used by a real round (CP-SAT, SQLite and Postgres): auto lets the
placement split the pool of accelerators across clusters; static keeps the children as written,
in the clusters named."""

from __future__ import annotations

import httpx
import yaml
from fastapi import FastAPI

from tests.factories import create_cluster, create_queue, example, inventory, submit

HYPERJOB = yaml.safe_load(example("hyperjob-llm-training.yaml"))  # 2 children of 16 pods x 8


async def two_clusters(api: httpx.AsyncClient) -> None:
    """gpu-east and gpu-west, 40 nodes of 8 GPUs each (320), linked; the queue llm."""
    for name in ("gpu-east", "gpu-west"):
        await create_cluster(api, name)
        pushed = await api.put(
            f"/api/v1/clusters/{name}/inventory", json=inventory(name, tors=5, nodes_per_tor=8)
        )
        assert pushed.status_code == 200
    await api.post(
        "/api/v1/links", json={"clusterA": "gpu-east", "clusterB": "gpu-west", "capacityGbps": 400}
    )
    await create_queue(api, "llm")


def hyperjob(name: str, **entry: object) -> dict[str, object]:
    doc = yaml.safe_load(yaml.safe_dump(HYPERJOB))
    doc["metadata"]["name"] = name
    doc["spec"]["replicatedJobs"][0].update(entry)
    return doc


async def test_auto_split_places_the_pool_across_both_clusters(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    await two_clusters(api)
    doc = hyperjob("pool", splitPolicy={"mode": "auto", "accelerators": 512})  # 64 pods
    response = await submit(api, doc)
    assert response.status_code == 201, response.text
    uid = response.json()["uid"]
    report = await app.state.scheduler.run_once()
    assert report is not None and report.result.placed == [uid]
    shares = (await api.get(f"/api/v1/jobs/{uid}")).json()["placement"]["shares"]
    # Neither cluster holds 512 GPUs: the pool is split, in pods, not in children of 16.
    assert sorted(s["cluster"] for s in shares) == ["gpu-east", "gpu-west"]
    assert sum(s["pods"] for s in shares) == 64
    assert all(s["pods"] <= 40 for s in shares)  # 320 GPUs a cluster


async def test_static_split_stays_in_the_clusters_named(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    await two_clusters(api)
    # Three children of 128 GPUs: 384, more than one cluster's 320.
    pinned = hyperjob(
        "pinned", replicas=3, splitPolicy={"mode": "static"}, clusterNames=["gpu-west"]
    )
    pinned["spec"]["minAvailable"] = 3
    free = hyperjob("free", replicas=3, splitPolicy={"mode": "static", "accelerators": 384})
    free["spec"]["minAvailable"] = 3
    free["spec"]["maxDomains"] = 2
    uid = (await submit(api, pinned)).json()["uid"]
    await app.state.scheduler.run_once()
    job = (await api.get(f"/api/v1/jobs/{uid}")).json()
    assert job["state"] == "Pending"  # never split over gpu-east, which it did not name
    assert (await api.post(f"/api/v1/jobs/{uid}/cancel")).status_code == 200

    uid = (await submit(api, free)).json()["uid"]
    await app.state.scheduler.run_once()
    shares = (await api.get(f"/api/v1/jobs/{uid}")).json()["placement"]["shares"]
    # Unpinned, the same children go to both clusters, each child whole (16 pods).
    assert sorted(s["cluster"] for s in shares) == ["gpu-east", "gpu-west"]
    assert sorted(s["pods"] for s in shares) == [16, 32]
