"""Clusters over the REST API, on SQLite and Postgres."""

from __future__ import annotations

import httpx
import pytest

from tests.factories import create_cluster, inventory, job_document


async def test_register_returns_the_agent_token_once(api: httpx.AsyncClient) -> None:
    created = await create_cluster(api, "gpu-east", labels={"region": "us-east", "site": "a"})
    assert created["agentToken"].startswith("vg_")
    assert created["state"] == "Unknown"
    assert created["capacity"] == []
    shown = (await api.get("/api/v1/clusters/gpu-east")).json()
    assert "agentToken" not in shown
    assert shown["labels"] == {"region": "us-east", "site": "a"}
    listed = (await api.get("/api/v1/clusters")).json()["items"]
    assert [c["name"] for c in listed] == ["gpu-east"]


async def test_duplicate_registration_conflicts(api: httpx.AsyncClient) -> None:
    await create_cluster(api, "gpu-east")
    response = await api.post("/api/v1/clusters", json={"name": "gpu-east"})
    assert response.status_code == 409
    assert response.json()["message"] == "cluster 'gpu-east' already exists"


async def test_invalid_cluster_name_names_the_field(api: httpx.AsyncClient) -> None:
    response = await api.post("/api/v1/clusters", json={"name": "GPU East"})
    assert response.status_code == 422
    assert response.json()["details"]["causes"][0]["field"] == "name"
    response = await api.post("/api/v1/clusters", json={"name": "ok", "colour": "red"})
    assert response.status_code == 422
    assert response.json()["details"]["causes"][0] == {
        "field": "colour",
        "message": "Extra inputs are not permitted",
    }


async def test_inventory_snapshot_sets_capacity_and_topology(api: httpx.AsyncClient) -> None:
    token = (await create_cluster(api, "gpu-east"))["agentToken"]
    snapshot = inventory("gpu-east", tors=2, nodes_per_tor=4)
    snapshot["nodes"][0]["gpuUsed"] = 3
    snapshot["nodes"][1]["ready"] = False
    response = await api.put(
        "/api/v1/clusters/gpu-east/inventory",
        json=snapshot,
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 200, response.text
    assert response.json()["capacity"] == [
        {"gpuModel": "H100", "total": 64, "free": 53, "used": 11}
    ]
    cluster = (await api.get("/api/v1/clusters/gpu-east")).json()
    assert cluster["inventoryGeneration"] == 1
    assert cluster["nodes"] == {"total": 8, "ready": 7}
    topology = (await api.get("/api/v1/clusters/gpu-east/topology")).json()["domains"]
    by_name = {d["name"]: d for d in topology}
    assert by_name["gpu-east-spine"]["capacity"][0]["free"] == 53
    assert by_name["gpu-east-tor0"]["capacity"][0] == {
        "gpuModel": "H100",
        "total": 32,
        "free": 21,
        "used": 11,
    }
    assert by_name["gpu-east-tor0"]["nodesNotReady"] == ["gpu-east-n0-1"]
    assert by_name["gpu-east-tor1"]["parent"] == "gpu-east-spine"

    # A second snapshot replaces the first entirely.
    response = await api.put(
        "/api/v1/clusters/gpu-east/inventory",
        json=inventory("gpu-east", tors=1, nodes_per_tor=2, gpu_model="A100"),
    )
    assert response.json()["capacity"] == [{"gpuModel": "A100", "total": 16, "free": 16, "used": 0}]
    cluster = (await api.get("/api/v1/clusters/gpu-east")).json()
    assert cluster["inventoryGeneration"] == 2
    assert cluster["nodes"]["total"] == 2


@pytest.mark.parametrize(
    ("part", "index", "key", "value", "field", "message"),
    [
        pytest.param(
            "nodes",
            2,
            "domain",
            "nowhere",
            "nodes[2].domain",
            "unknown domain 'nowhere'",
            id="node-in-an-unknown-domain",
        ),
        pytest.param("nodes", 0, "gpuUsed", 9, "nodes[0]", None, id="more-gpus-used-than-it-has"),
        pytest.param(
            "domains", 1, "tier", 3, "domains[1].parent", None, id="domain-above-its-parent"
        ),
    ],
)
async def test_inconsistent_snapshot_is_refused_whole(
    api: httpx.AsyncClient,
    part: str,
    index: int,
    key: str,
    value: object,
    field: str,
    message: str | None,
) -> None:
    await create_cluster(api, "gpu-east")
    await api.put("/api/v1/clusters/gpu-east/inventory", json=inventory("gpu-east"))
    bad = inventory("gpu-east")
    bad[part][index][key] = value
    response = await api.put("/api/v1/clusters/gpu-east/inventory", json=bad)
    assert response.status_code == 422
    causes = response.json()["details"]["causes"]
    assert causes[0]["field"] == field
    if message is not None:
        assert causes == [{"field": field, "message": message}]
    cluster = (await api.get("/api/v1/clusters/gpu-east")).json()
    assert cluster["inventoryGeneration"] == 1
    assert cluster["nodes"]["total"] == 8


async def test_delete_cluster(api: httpx.AsyncClient) -> None:
    await create_cluster(api, "gpu-east")
    await api.put("/api/v1/clusters/gpu-east/inventory", json=inventory("gpu-east"))
    assert (await api.delete("/api/v1/clusters/gpu-east")).status_code == 204
    assert (await api.get("/api/v1/clusters/gpu-east")).status_code == 404
    assert (await api.delete("/api/v1/clusters/gpu-east")).status_code == 404
    await create_cluster(api, "gpu-east")  # the name is free again


async def test_rotating_the_token_revokes_the_old_one(api: httpx.AsyncClient) -> None:
    old = (await create_cluster(api, "gpu-east"))["agentToken"]
    new = (await api.post("/api/v1/clusters/gpu-east/token")).json()["agentToken"]
    assert new != old

    async def push_with(token: str) -> int:
        pushed = await api.put(
            "/api/v1/clusters/gpu-east/inventory",
            json=inventory("gpu-east"),
            headers={"Authorization": f"Bearer {token}"},
        )
        return pushed.status_code

    assert await push_with(old) == 401
    assert await push_with(new) == 200
    reasons = [
        e["reason"] for e in (await api.get("/api/v1/clusters/gpu-east/events")).json()["items"]
    ]
    assert reasons == ["Ready", "TokenRotated", "Registered"]  # the push made the cluster Ready


async def test_nul_characters_are_refused_wherever_they_come(api: httpx.AsyncClient) -> None:
    """Postgres text cannot hold NUL: refused as bad input, never a 500 (found by fuzzing)."""
    body = await api.post("/api/v1/clusters", json={"name": "gpu-east", "description": "a\x00b"})
    assert body.status_code == 422
    assert "description: NUL" in body.text
    assert "\x00" not in body.json()["message"]  # named escaped, never echoed raw
    url = await api.get("/api/v1/clusters/gpu%00east")
    assert url.status_code == 400
    assert "NUL (%00)" in url.json()["message"]
    document = job_document("train")
    document["metadata"]["labels"] = {"team\x00": "x"}
    job = await api.post("/api/v1/jobs", json=document)
    assert job.status_code == 422
    assert job.json()["details"]["causes"][0]["field"] == "metadata.labels.team\\u0000"
