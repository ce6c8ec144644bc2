"""Links between clusters."""

from __future__ import annotations

import httpx

from tests.factories import create_cluster


async def _two_clusters(api: httpx.AsyncClient) -> None:
    await create_cluster(api, "gpu-east")
    await create_cluster(api, "gpu-west")


async def test_link_round_trip(api: httpx.AsyncClient) -> None:
    await _two_clusters(api)
    response = await api.post(
        "/api/v1/links",
        json={
            "clusterA": "gpu-west",
            "clusterB": "gpu-east",
            "capacityGbps": 400,
            "latencyMs": 12.5,
        },
    )
    assert response.status_code == 201
    link = response.json()
    assert (link["clusterA"], link["clusterB"]) == ("gpu-east", "gpu-west")  # stored in name order
    assert (link["capacityGbps"], link["reservedGbps"], link["freeGbps"], link["latencyMs"]) == (
        400,
        0,
        400,
        12.5,
    )
    assert [
        (x["clusterA"], x["clusterB"]) for x in (await api.get("/api/v1/links")).json()["items"]
    ] == [("gpu-east", "gpu-west")]
    assert (await api.delete("/api/v1/links/gpu-west/gpu-east")).status_code == 204
    assert (await api.get("/api/v1/links")).json()["items"] == []
    assert (await api.delete("/api/v1/links/gpu-west/gpu-east")).status_code == 404


async def test_duplicate_link_in_either_order_conflicts(api: httpx.AsyncClient) -> None:
    await _two_clusters(api)
    body = {"clusterA": "gpu-east", "clusterB": "gpu-west", "capacityGbps": 100}
    assert (await api.post("/api/v1/links", json=body)).status_code == 201
    swapped = {**body, "clusterA": "gpu-west", "clusterB": "gpu-east"}
    response = await api.post("/api/v1/links", json=swapped)
    assert response.status_code == 409
    assert response.json()["message"] == "a link between gpu-east and gpu-west already exists"


async def test_invalid_links_name_the_field(api: httpx.AsyncClient) -> None:
    await _two_clusters(api)
    cases = [
        ({"clusterA": "gpu-east", "clusterB": "gpu-east", "capacityGbps": 1}, "clusterB"),
        ({"clusterA": "gpu-east", "clusterB": "gpu-north", "capacityGbps": 1}, "clusterB"),
        ({"clusterA": "gpu-east", "clusterB": "gpu-west", "capacityGbps": 0}, "capacityGbps"),
        (
            {"clusterA": "gpu-east", "clusterB": "gpu-west", "capacityGbps": 10, "latencyMs": -1},
            "latencyMs",
        ),
        ({"clusterA": "gpu-east", "capacityGbps": 10}, "clusterB"),
    ]
    for body, field in cases:
        response = await api.post("/api/v1/links", json=body)
        assert response.status_code == 422, body
        assert response.json()["details"]["causes"][0]["field"] == field, response.json()


async def test_deleting_a_cluster_removes_its_links(api: httpx.AsyncClient) -> None:
    await _two_clusters(api)
    await api.post(
        "/api/v1/links", json={"clusterA": "gpu-east", "clusterB": "gpu-west", "capacityGbps": 100}
    )
    assert (await api.delete("/api/v1/clusters/gpu-west")).status_code == 204
    assert (await api.get("/api/v1/links")).json()["items"] == []
