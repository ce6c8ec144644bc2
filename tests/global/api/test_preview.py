"""POST /api/v1/jobs/preview: checked like a submission, placed by the solver on the current
capacity as if first in line, nothing stored."""

from __future__ import annotations

import httpx

from tests.factories import (
    create_cluster,
    example,
    inventory,
    job_document,
    split_annotations,
    to_yaml,
)


async def two_clusters(api: httpx.AsyncClient) -> None:
    for name in ("east", "west"):
        await create_cluster(api, name)
        response = await api.put(f"/api/v1/clusters/{name}/inventory", json=inventory(name))
        assert response.status_code == 200  # 64 H100 each
    await api.post(
        "/api/v1/links", json={"clusterA": "east", "clusterB": "west", "capacityGbps": 100}
    )


def split(gbps: str) -> dict:
    doc = job_document("big", replicas=12)  # 96 GPUs: more than one cluster
    doc["metadata"]["annotations"] = split_annotations(4, crossing_gbps=gbps)
    return doc


async def test_preview_places_without_storing(api: httpx.AsyncClient) -> None:
    await two_clusters(api)
    whole = (await api.post("/api/v1/jobs/preview", json=job_document("small", replicas=2))).json()
    assert whole["admitted"]
    assert len(whole["shares"]) == 1
    assert whole["shares"][0]["gpus"] == 16

    response = await api.post(
        "/api/v1/jobs/preview",
        content=to_yaml(split("50")),
        headers={"Content-Type": "application/yaml"},
    )
    preview = response.json()
    assert response.status_code == 200
    assert preview["admitted"]
    assert sorted(s["cluster"] for s in preview["shares"]) == ["east", "west"]
    assert sum(s["pods"] for s in preview["shares"]) == 12
    assert preview["linkReservations"] == [
        {"clusterA": "east", "clusterB": "west", "gbps": 50.0, "staging": False}
    ]

    too_thin = (await api.post("/api/v1/jobs/preview", json=split("150"))).json()
    assert not too_thin["admitted"]
    assert too_thin["shares"] == []
    assert "100 Gbps" in too_thin["reason"]
    assert "150" in too_thin["reason"]

    assert (await api.get("/api/v1/jobs")).json()["items"] == []  # nothing stored
    assert (await api.get("/api/v1/links")).json()["items"][0]["reservedGbps"] == 0


async def test_preview_refuses_what_submit_refuses(api: httpx.AsyncClient) -> None:
    doc = job_document("bad", replicas=2)
    doc["spec"]["minAvaliable"] = 1
    response = await api.post("/api/v1/jobs/preview", json=doc)
    assert response.status_code == 422
    assert response.json()["details"]["causes"][0]["field"] == "spec.minAvaliable"
    missing = await api.post("/api/v1/jobs/preview", json=job_document("q", queue="nope"))
    assert missing.status_code == 422
    assert "queue 'nope' does not exist" in missing.text


async def test_a_preview_of_a_taken_name_is_the_submissions_409(api: httpx.AsyncClient) -> None:
    # `vglobal submit --dry-run` said VALID for a name a running job holds; submit then got 409.
    assert (await api.post("/api/v1/jobs", json=job_document("taken"))).status_code == 201
    again = await api.post("/api/v1/jobs/preview", json=job_document("taken"))
    assert again.status_code == 409, again.text
    assert again.json()["message"] == "job ml/taken already exists and has not finished"
    free = await api.post("/api/v1/jobs/preview", json=job_document("free"))
    assert free.status_code == 200, free.text


async def test_preview_places_a_heterogeneous_hyperjob_child_by_child(
    api: httpx.AsyncClient,
) -> None:
    # Volcano's HyperJob use case 2 (an H100 child pinned to gpu-east, an A100 one to
    # gpu-west): previewed as a round places it, each child in a cluster with its model.
    for name, model in (("gpu-east", "H100"), ("gpu-west", "A100")):
        await create_cluster(api, name)
        body = inventory(name, gpu_model=model)
        assert (await api.put(f"/api/v1/clusters/{name}/inventory", json=body)).status_code == 200
    response = await api.post(
        "/api/v1/jobs/preview",
        content=example("hyperjob-heterogeneous.yaml"),
        headers={"Content-Type": "application/yaml"},
    )
    preview = response.json()
    assert response.status_code == 200 and preview["admitted"], preview
    assert [(s["cluster"], s["pods"]) for s in preview["shares"]] == [
        ("gpu-east", 8),
        ("gpu-west", 8),
    ]
