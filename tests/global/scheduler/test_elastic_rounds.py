"""Elastic width in the server's rounds: an elastic job is placed at the width that fits, and
its queue holds that width against its quota (as the simulator counts it)."""

from __future__ import annotations

import httpx
from fastapi import FastAPI

from tests.factories import (
    create_cluster,
    create_queue,
    elastic_document,
    inventory,
    job_document,
    submit,
)


async def placed_pods(api: httpx.AsyncClient, uid: str) -> list[tuple[str, int]]:
    job = (await api.get(f"/api/v1/jobs/{uid}")).json()
    return [(s["cluster"], s["pods"]) for s in (job.get("placement") or {}).get("shares") or []]


async def test_a_narrow_elastic_job_holds_its_width_against_the_quota(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    for name in ("gpu-east", "gpu-west"):
        await create_cluster(api, name)
        body = inventory(name, tors=2, nodes_per_tor=4)  # 8 nodes of 8 GPUs
        assert (await api.put(f"/api/v1/clusters/{name}/inventory", json=body)).status_code == 200
    await create_queue(api, "q", gpuQuota=96)
    # 16 pods (128 GPUs), at least 4: one cluster holds 8 of them.
    elastic = (
        await submit(api, elastic_document("elastic", queue="q", replicas=16, minAvailable=4))
    ).json()["uid"]
    assert await app.state.scheduler.run_once() is not None
    (share,) = await placed_pods(api, elastic)
    assert share[1] == 8
    # The queue holds 64 of its 96 GPUs (not the document's 128): a 16-GPU job still fits.
    small = (await submit(api, job_document("small", queue="q", replicas=2))).json()["uid"]
    assert await app.state.scheduler.run_once() is not None
    assert [pods for _, pods in await placed_pods(api, small)] == [2]
    # And a job over what is left of the quota waits for it.
    big = (await submit(api, job_document("big", queue="q", replicas=3))).json()["uid"]
    await app.state.scheduler.run_once()
    job = (await api.get(f"/api/v1/jobs/{big}")).json()
    assert job["state"] == "Pending" and "quota" in job["pendingReason"], job["pendingReason"]
