"""Queues."""

from __future__ import annotations

import httpx

from tests.factories import create_queue, job_document, submit


async def test_queue_round_trip(api: httpx.AsyncClient) -> None:
    created = await create_queue(api, "llm", weight=4, gpuQuota=2048, priority=10)
    assert created["usage"] == {
        "allocatedGpus": 0,
        "pendingJobs": 0,
        "activeJobs": 0,
        "pendingGpus": 0,
    }
    assert created["fairShareGpus"] == 0  # wants nothing, deserves nothing
    names = [q["name"] for q in (await api.get("/api/v1/queues")).json()["items"]]
    assert names == ["default", "llm"]  # the default queue exists from the start
    patched = (await api.patch("/api/v1/queues/llm", json={"weight": 8})).json()
    assert (patched["weight"], patched["gpuQuota"], patched["priority"]) == (8, 2048, 10)
    lifted = (await api.patch("/api/v1/queues/llm", json={"gpuQuota": None})).json()
    assert lifted["gpuQuota"] is None
    assert lifted["weight"] == 8
    assert (await api.get("/api/v1/queues/llm")).json()["gpuQuota"] is None
    assert (await api.delete("/api/v1/queues/llm")).status_code == 204
    assert (await api.get("/api/v1/queues/llm")).status_code == 404


async def test_queue_conflicts_and_validation(api: httpx.AsyncClient) -> None:
    await create_queue(api, "llm")
    assert (await api.post("/api/v1/queues", json={"name": "llm"})).status_code == 409
    response = await api.post("/api/v1/queues", json={"name": "x", "weight": 0})
    assert response.status_code == 422
    assert response.json()["details"]["causes"][0]["field"] == "weight"
    # Beyond the Queue CRD's bounds: the error names what the caller sent (it named
    # spec.weight and metadata.name of the document the older shape becomes).
    for body, field in (({"name": "x", "weight": 70000}, "weight"), ({"name": "root"}, "name")):
        response = await api.post("/api/v1/queues", json=body)
        assert response.status_code == 422
        assert response.json()["details"]["causes"][0]["field"] == field, response.text
    response = await api.patch("/api/v1/queues/llm", json={"weight": 70000})
    assert response.json()["details"]["causes"][0]["field"] == "weight"
    response = await api.patch("/api/v1/queues/llm", json={"weight": None})
    assert response.status_code == 422
    assert response.json()["message"] == "weight: must not be null"
    assert (await api.patch("/api/v1/queues/nope", json={"weight": 2})).status_code == 404
    response = await api.delete("/api/v1/queues/default")
    assert response.status_code == 409


async def test_queue_with_unfinished_jobs_cannot_be_deleted(api: httpx.AsyncClient) -> None:
    await create_queue(api, "llm")
    job = (await submit(api, job_document(queue="llm"))).json()
    usage = (await api.get("/api/v1/queues/llm")).json()["usage"]
    assert usage == {"allocatedGpus": 0, "pendingJobs": 1, "activeJobs": 1, "pendingGpus": 16}
    response = await api.delete("/api/v1/queues/llm")
    assert response.status_code == 409
    assert response.json()["message"] == "queue 'llm' has 1 unfinished jobs"
    await api.post(f"/api/v1/jobs/{job['uid']}/cancel")
    assert (await api.get("/api/v1/queues/llm")).json()["usage"]["activeJobs"] == 0
