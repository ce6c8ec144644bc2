"""A split job whose clusters both lack its data (SQLite and Postgres): each share gets its own
copy from the cluster that holds the data, each copy's bandwidth is held on its own link beside
the split's crossing traffic, and each returns when that share's staging ends - not when the
other's does."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from tests.data_documents import data_source_claim
from tests.data_rounds import (
    Reports,
    apply,
    clusters_of,
    corpus,
    job,
    put_inventory,
    reader,
    rows,
)
from tests.factories import create_cluster, job_document, split_annotations, submit
from volcano_global.rpc.v1 import agent_pb2 as pb


@pytest.fixture
async def agents(app: FastAPI, api: httpx.AsyncClient) -> AsyncIterator[dict[str, Reports]]:
    """gpu-a and gpu-b over agent streams, gpu-c (where the data is) by its inventory; every
    pair linked at 400 Gbps."""
    found = {}
    for name in ("gpu-a", "gpu-b"):
        token = (await create_cluster(api, name))["agentToken"]
        found[name] = Reports(app, token, name)
        await found[name].start()
    await create_cluster(api, "gpu-c")
    await put_inventory(api, "gpu-c")
    for a, b in (("gpu-a", "gpu-b"), ("gpu-a", "gpu-c"), ("gpu-b", "gpu-c")):
        link = {"clusterA": a, "clusterB": b, "capacityGbps": 400}
        assert (await api.post("/api/v1/links", json=link)).status_code == 201
    yield found
    for reports in found.values():
        await reports.stream.close()


async def reserved(api: httpx.AsyncClient) -> dict[str, float]:
    items = (await api.get("/api/v1/links")).json()["items"]
    return {f"{i['clusterA']}-{i['clusterB']}": i["reservedGbps"] for i in items}


async def test_each_share_of_a_split_stages_and_returns_its_own_bandwidth(
    app: FastAPI, api: httpx.AsyncClient, agents: dict[str, Reports]
) -> None:
    await corpus(api, where="gpu-c")
    hog = await reader(api, "hog", estimate="10h")  # gpu-c, the holder, busy for 10 hours
    await app.state.scheduler.run_once()
    assert await clusters_of(api, hog) == ["gpu-c"]

    await apply(api, data_source_claim("train-corpus", workload="train"))
    train = job_document("train", replicas=12, runningEstimate="1h")  # 96 GPUs: a split
    train["metadata"]["annotations"] = split_annotations(4, crossing_gbps=50)
    uid = (await submit(api, train)).json()["uid"]
    assert (await app.state.scheduler.run_once()).result.placed == [uid]
    assert sorted(await clusters_of(api, uid)) == ["gpu-a", "gpu-b"]
    shares, held = await rows(app, api, uid)
    by_share = {r.staging_share_id: r.gbps for r in held}
    for share in shares:
        [item] = share.staging
        assert (item["source_cluster"], item["gbps"]) == ("gpu-c", 100.0)
        assert by_share[share.id] == 100.0
    assert by_share[None] == 50.0  # the split's own, for its whole life
    assert await reserved(api) == {"gpu-a-gpu-b": 50.0, "gpu-a-gpu-c": 100.0, "gpu-b-gpu-c": 100.0}

    placement = (await job(api, uid))["placement"]["uid"]
    await agents["gpu-a"].report(placement, pb.SHARE_PHASE_ACCEPTED)
    assert await reserved(api) == {"gpu-a-gpu-b": 50.0, "gpu-a-gpu-c": 0.0, "gpu-b-gpu-c": 100.0}
    await agents["gpu-b"].report(placement, pb.SHARE_PHASE_STAGING)
    assert (await reserved(api))["gpu-b-gpu-c"] == 100.0
    await agents["gpu-b"].report(placement, pb.SHARE_PHASE_ACCEPTED)
    assert await reserved(api) == {"gpu-a-gpu-b": 50.0, "gpu-a-gpu-c": 0.0, "gpu-b-gpu-c": 0.0}
    assert (await job(api, uid))["state"] == "Dispatched"
    source = (await api.get("/api/v1/datasources/corpus-v3")).json()
    assert sorted(source["clusters"]) == ["gpu-a", "gpu-b", "gpu-c"]
