"""A large fleet a piece at a time: clusters paged and searched by name and state, a
cluster's topology one level at a time (SQLite and Postgres)."""

from __future__ import annotations

import httpx
import pytest

from tests.factories import create_cluster, inventory


async def pages(api: httpx.AsyncClient, **params: object) -> list[list[str]]:
    """Every page of the cluster list for `params`, following the continue tokens."""
    out: list[list[str]] = []
    token = None
    while True:
        query = {**params, **({"continue": token} if token else {})}
        answer = (await api.get("/api/v1/clusters", params=query)).json()
        out.append([c["name"] for c in answer["items"]])
        token = answer["metadata"]["continue"]
        if token is None:
            return out


async def test_clusters_page_by_name_and_search(api: httpx.AsyncClient) -> None:
    names = [f"gpu-{region}-{i}" for region in ("east", "west") for i in range(3)]
    for name in names:
        await create_cluster(api, name)
    await api.put("/api/v1/clusters/gpu-west-1/inventory", json=inventory("gpu-west-1"))

    assert await pages(api, limit=4) == [sorted(names)[:4], sorted(names)[4:]]
    assert await pages(api) == [sorted(names)]  # no limit: every cluster, as before
    assert await pages(api, text="WEST", limit=2) == [
        ["gpu-west-0", "gpu-west-1"],
        ["gpu-west-2"],
    ]
    assert await pages(api, state="Ready") == [["gpu-west-1"]]  # the one with an inventory
    assert await pages(api, text="%") == [[]]  # a LIKE wildcard is a plain character


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"limit": 0}, "limit (query)"),
        ({"limit": 5000}, "limit (query)"),
        ({"state": "Sleepy"}, "state (query)"),
        ({"continue": "%%%"}, "continue (query)"),
        ({"continue": "AA"}, "continue (query)"),  # a NUL byte: a 500 on Postgres before
        ({"text": "x" * 64}, "text (query)"),
    ],
)
async def test_bad_paging_is_refused_naming_the_field(
    api: httpx.AsyncClient, params: dict[str, object], field: str
) -> None:
    response = await api.get("/api/v1/clusters", params=params)
    assert response.status_code == 422, response.text
    assert [c["field"] for c in response.json()["details"]["causes"]] == [field]


async def test_the_topology_one_level_at_a_time(api: httpx.AsyncClient) -> None:
    await create_cluster(api, "east")
    body = inventory("east", tors=3, nodes_per_tor=2)
    assert (await api.put("/api/v1/clusters/east/inventory", json=body)).status_code == 200
    url = "/api/v1/clusters/east/topology"

    (spine,) = (await api.get(url, params={"top": "true"})).json()["domains"]
    assert (spine["name"], spine["children"], spine["nodes"]) == ("east-spine", 3, 6)
    tors = (await api.get(url, params={"parent": "east-spine"})).json()["domains"]
    assert [(d["name"], d["children"], d["nodes"]) for d in tors] == [
        (f"east-tor{t}", 0, 2) for t in range(3)
    ]
    assert (await api.get(url, params={"parent": "east-tor0"})).json()["domains"] == []
    assert len((await api.get(url)).json()["domains"]) == 4  # whole, as before

    unknown = await api.get(url, params={"parent": "west-spine"})
    assert unknown.status_code == 422
    assert unknown.json()["details"]["causes"][0]["field"] == "parent (query)"
    both = await api.get(url, params={"parent": "east-spine", "top": "true"})
    assert both.status_code == 422
    assert both.json()["details"]["causes"][0]["field"] == "top (query)"
