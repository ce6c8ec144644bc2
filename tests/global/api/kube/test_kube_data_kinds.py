"""DataSources and DataSourceClaims through the Kubernetes-compatible API on each database:
who may create them (admins the sources; a claim in a namespace of the caller's queues), a
queue user's reads limited to its namespaces, lists across namespaces paged, and no watch."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from tests.conftest import app_settings, running
from tests.data_documents import data_source, data_source_claim
from tests.factories import to_yaml
from volcano_global.db.engine import transaction
from volcano_global.services.data import add_locality

SOURCES = "/k8s/apis/datadependency.volcano.sh/v1alpha1/datasources"
ALL_CLAIMS = "/k8s/apis/datadependency.volcano.sh/v1alpha1/datasourceclaims"


def claims_in(namespace: str) -> str:
    return f"/k8s/apis/datadependency.volcano.sh/v1alpha1/namespaces/{namespace}/datasourceclaims"


@pytest.fixture
async def kube(database_url: str) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    # The shipped default: a queue's jobs (and claims) in the namespace named after it.
    settings = app_settings(database_url, tenancy={"default_namespaces": ["{queue}"]})
    async with running(settings) as served:
        yield served


async def _user(api: httpx.AsyncClient, queue: str) -> dict[str, str]:
    assert (await api.post("/api/v1/queues", json={"name": queue})).status_code == 201
    issued = await api.post(
        "/api/v1/tokens", json={"name": f"team {queue}", "role": "queue-user", "queues": [queue]}
    )
    return {"Authorization": f"Bearer {issued.json()['token']}"}


async def test_roles_namespaces_paging_and_no_watch(
    kube: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    _, api = kube
    user = await _user(api, "llm")
    refused = await api.post(SOURCES, json=data_source(), headers=user)
    assert refused.status_code == 403, refused.text
    assert (await api.post(SOURCES, json=data_source())).status_code == 201
    taken = await api.post(SOURCES, json=data_source())
    assert taken.status_code == 409

    theirs = await api.post(
        claims_in("vision"), json=data_source_claim(namespace="vision"), headers=user
    )
    assert theirs.status_code == 403, theirs.text
    for namespace in ("llm", "vision"):
        created = await api.post(
            claims_in(namespace),
            json=data_source_claim(namespace=namespace),
            headers=user if namespace == "llm" else None,
        )
        assert created.status_code == 201, created.text
        assert created.json()["status"] == {"phase": "Bound", "boundDataSource": "corpus-v3"}

    mine = (await api.get(ALL_CLAIMS, headers=user)).json()["items"]
    assert [c["metadata"]["namespace"] for c in mine] == ["llm"]
    hidden = await api.get(f"{claims_in('vision')}/train-corpus", headers=user)
    assert hidden.status_code == 404
    # Across namespaces, a page at a time: the same name in two namespaces is two objects.
    first = (await api.get(ALL_CLAIMS, params={"limit": 1})).json()
    assert [c["metadata"]["namespace"] for c in first["items"]] == ["llm"]
    rest = (
        await api.get(ALL_CLAIMS, params={"limit": 1, "continue": first["metadata"]["continue"]})
    ).json()
    assert [c["metadata"]["namespace"] for c in rest["items"]] == ["vision"]

    assert (await api.get(SOURCES, params={"watch": "true"})).status_code == 405


async def test_a_patch_and_a_gitops_resync_keep_the_clusters_the_global_added(
    kube: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    # The served spec is the one applied; where the data is now is in status. The spec served
    # with the added clusters made `kubectl label` store them in the document, and the next
    # re-sync of the unchanged file then reset the locality, forgetting every staged copy.
    app, api = kube
    assert (await api.post(SOURCES, json=data_source())).status_code == 201
    async with transaction(app.state.sessions) as session:
        await add_locality(session, source="corpus-v3", cluster="gpu-east")
    served = (await api.get(f"{SOURCES}/corpus-v3")).json()
    assert served["spec"]["locality"]["clusterNames"] == ["gpu-west"]
    assert served["status"]["locality"]["clusterNames"] == ["gpu-west", "gpu-east"]

    labelled = await api.patch(
        f"{SOURCES}/corpus-v3",
        json={"metadata": {"labels": {"team": "llm"}}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert labelled.status_code == 200, labelled.text
    resync = await api.post(
        "/api/v1/apply",
        content=to_yaml(data_source()),
        headers={"Content-Type": "application/yaml"},
    )
    assert resync.status_code == 200, resync.text
    assert (await api.get("/api/v1/datasources/corpus-v3")).json()["clusters"] == [
        "gpu-west",
        "gpu-east",
    ]
