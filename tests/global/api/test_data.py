"""DataSources and DataSourceClaims through /api/v1/apply and the REST reads (issue 33, items 1,
2 and 5): Volcano Global's documents accepted unchanged, sizes in bytes, errors naming the
field, who may write which, a claim applied after its job seen by the next round's read of
data needs, and the checkpoint report's cluster and size."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import yaml
from fastapi import FastAPI

from tests.conftest import app_settings, running
from tests.data_documents import data_source, data_source_claim
from tests.factories import create_cluster, example, job_document, submit
from volcano_global.jobspec.extensions import COMMUNICATION
from volcano_global.services.data import data_needs
from volcano_global.solver.data import CheckpointNeed, DatasetNeed

YAML = {"Content-Type": "application/yaml"}
TIB = 2**40


async def apply(
    api: httpx.AsyncClient, *documents: Any, headers: dict[str, str] | None = None
) -> httpx.Response:
    return await api.post(
        "/api/v1/apply", content=yaml.safe_dump_all(documents), headers=YAML | (headers or {})
    )


async def results(api: httpx.AsyncClient, *documents: Any) -> list[tuple[str, str]]:
    response = await apply(api, *documents)
    assert response.status_code == 200, response.text
    return [(i["kind"], i["result"]) for i in response.json()["items"]]


@pytest.fixture
async def served(database_url: str) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    async with running(app_settings(database_url)) as (app, client):
        yield app, client


async def needs_of(app: FastAPI, job_id: str) -> Any:
    async with app.state.sessions() as session:
        return (await data_needs(session, job_ids=[uuid.UUID(job_id)]))[uuid.UUID(job_id)]


async def test_a_data_source_applies_unchanged_and_reads_back_with_its_size(
    api: httpx.AsyncClient,
) -> None:
    document = data_source(clusters=("gpu-west", "gpu-central"))
    assert await results(api, document) == [("DataSource", "created")]
    assert await results(api, document) == [("DataSource", "unchanged")]
    moved = data_source(clusters=("gpu-east",))
    assert await results(api, moved) == [("DataSource", "configured")]

    listed = (await api.get("/api/v1/datasources")).json()["items"]
    assert [(d["name"], d["clusters"], d["sizeBytes"]) for d in listed] == [
        ("corpus-v3", ["gpu-east"], 40 * TIB)
    ]
    shown = (await api.get("/api/v1/datasources/corpus-v3")).json()["object"]
    assert shown["spec"] == moved["spec"]  # the document as written
    assert shown["apiVersion"] == "datadependency.volcano.sh/v1alpha1"
    assert (await api.get("/api/v1/datasources/nope")).status_code == 404


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"attributes": {"size": "40Zi"}}, "spec.attributes.size"),
        ({"attributes": {"size": "-1Ti"}}, "spec.attributes.size"),
        ({"locality": {}}, "spec.locality.clusterNames"),
        ({"locality": {"clusterNames": ["gpu-west", 7]}}, "spec.locality.clusterNames[1]"),
        ({"system": None}, "spec.system"),
        ({"replicas": 3}, "spec.replicas"),
    ],
)
async def test_a_bad_data_source_is_refused_naming_the_field(
    api: httpx.AsyncClient, change: dict[str, Any], field: str
) -> None:
    document = data_source()
    document["spec"] |= change
    document["spec"] = {k: v for k, v in document["spec"].items() if v is not None}
    response = await apply(api, document)
    (item,) = response.json()["items"]
    assert (item["result"], item["code"]) == ("error", 422)
    assert field in [c["field"] for c in item["causes"]], item
    assert (await api.get("/api/v1/datasources")).json()["items"] == []


async def test_a_claim_applied_after_its_job_is_in_the_next_rounds_needs(
    served: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    app, api = served
    job = (await submit(api, job_document("train"))).json()
    assert (await needs_of(app, job["uid"])).datasets == ()

    claim = data_source_claim(readGbps="25")
    assert await results(api, claim, data_source()) == [
        ("DataSourceClaim", "created"),
        ("DataSource", "created"),
    ]
    needs = await needs_of(app, job["uid"])
    assert needs.datasets == (
        DatasetNeed(
            name="corpus-v3",
            size_bytes=40 * TIB,
            clusters=("gpu-west",),
            read_gbps=25.0,
            source="claim",
            claim="ml/train-corpus",
        ),
    )
    listed = (await api.get("/api/v1/datasourceclaims")).json()["items"]
    assert [(c["namespace"], c["name"], c["boundDataSource"]) for c in listed] == [
        ("ml", "train-corpus", "corpus-v3")
    ]
    assert listed[0]["object"]["status"] == {"phase": "Bound", "boundDataSource": "corpus-v3"}
    # A claim for another workload, or of another kind of the same name, is not the job's.
    other = data_source_claim("other", workload="train", kind="HyperJob")
    assert await results(api, other) == [("DataSourceClaim", "created")]
    assert len((await needs_of(app, job["uid"])).datasets) == 1


async def test_a_declared_dataset_takes_its_locality_from_the_data_source(
    served: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    app, api = served
    document = job_document("declared")
    document["metadata"]["annotations"] = {
        COMMUNICATION: "{datasets: [{name: corpus-v3, size: 1Ti, readGbps: 40}, "
        "{name: scratch, size: 500Gi}], checkpoint: {size: 2Ti}}"
    }
    job = (await submit(api, document)).json()
    await results(api, data_source(clusters=("gpu-west", "gpu-central")))
    needs = await needs_of(app, job["uid"])
    assert [(d.name, d.size_bytes, d.clusters, d.read_gbps, d.bound) for d in needs.datasets] == [
        # The DataSource's size is the inventory's and wins over the declared one.
        ("corpus-v3", 40 * TIB, ("gpu-west", "gpu-central"), 40.0, True),
        ("scratch", 500 * 2**30, (), None, False),
    ]
    assert needs.checkpoint == CheckpointNeed(size_bytes=2 * TIB, cluster=None)


async def test_a_bad_declared_dataset_is_refused_naming_the_field(api: httpx.AsyncClient) -> None:
    document = job_document("bad")
    document["metadata"]["annotations"] = {COMMUNICATION: "{datasets: [{name: c, size: lots}]}"}
    response = await submit(api, document)
    assert response.status_code == 422
    fields = [c["field"] for c in response.json()["details"]["causes"]]
    assert fields == [f'metadata.annotations["{COMMUNICATION}"].datasets[0].size']


async def test_the_checkpoint_report_says_where_and_how_large(
    served: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    app, api = served
    await create_cluster(api, "gpu-west")
    job = (await submit(api, job_document("resumable"))).json()
    report = await api.post(
        f"/api/v1/jobs/{job['uid']}/checkpoints",
        json={"step": 1200, "sizeBytes": 3 * TIB, "cluster": "gpu-west"},
    )
    assert report.status_code == 200, report.text
    assert (report.json()["cluster"], report.json()["sizeBytes"]) == ("gpu-west", 3 * TIB)
    newer = await api.post(
        f"/api/v1/jobs/{job['uid']}/checkpoints", json={"step": 1300, "sizeBytes": 4 * TIB}
    )
    assert newer.status_code == 200, newer.text
    # The newest report stands alone: no cluster named and the job runs nowhere now.
    assert (await needs_of(app, job["uid"])).checkpoint == CheckpointNeed(4 * TIB, None)
    refused = await api.post(
        f"/api/v1/jobs/{job['uid']}/checkpoints", json={"step": 1400, "cluster": "gpu-nowhere"}
    )
    assert refused.status_code == 422
    assert refused.json()["details"]["causes"][0]["field"] == "cluster"


async def _queue_user(api: httpx.AsyncClient, queue: str) -> dict[str, str]:
    created = await api.post("/api/v1/queues", json={"name": queue, "weight": 1})
    assert created.status_code == 201, created.text
    issued = await api.post(
        "/api/v1/tokens", json={"name": f"team {queue}", "role": "queue-user", "queues": [queue]}
    )
    assert issued.status_code == 201, issued.text
    return {"Authorization": f"Bearer {issued.json()['token']}"}


async def test_who_may_write_data_sources_and_claims(api: httpx.AsyncClient) -> None:
    user = await _queue_user(api, "llm")
    # A DataSource is the federation's inventory: admins only.
    refused = await apply(api, data_source(), headers=user)
    assert refused.status_code == 403
    assert refused.json()["items"][0]["code"] == 403
    # A claim: in a namespace of the user's queues (the tests' default: the queue's own and
    # ml), not another's.
    theirs = await apply(api, data_source_claim(namespace="research"), headers=user)
    assert theirs.status_code == 403
    assert "'research'" in theirs.json()["items"][0]["message"]
    ours = await apply(api, data_source_claim(namespace="llm"), headers=user)
    assert ours.status_code == 200, ours.text
    assert ours.json()["items"][0]["result"] == "created"
    reserved = await apply(api, data_source_claim(namespace="kube-system"))
    assert reserved.json()["items"][0]["code"] == 403
    # The user reads its namespaces' claims; the admin reads them all.
    await apply(api, data_source_claim("admins", namespace="research"))
    mine = (await api.get("/api/v1/datasourceclaims", headers=user)).json()["items"]
    assert [(c["namespace"], c["name"]) for c in mine] == [("llm", "train-corpus")]
    everyone = (await api.get("/api/v1/datasourceclaims")).json()["items"]
    assert len(everyone) == 2
    forbidden = await api.delete("/api/v1/datasourceclaims/research/admins", headers=user)
    assert forbidden.status_code == 403
    assert (
        await api.delete("/api/v1/datasourceclaims/llm/train-corpus", headers=user)
    ).status_code == 204


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (
            {"workload": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "w"}},
            "spec.workload.kind",
        ),
        (
            {
                "workload": {
                    "apiVersion": "batch.volcano.sh/v1alpha1",
                    "kind": "Job",
                    "name": "w",
                    "namespace": "other",
                }
            },
            "spec.workload.namespace",
        ),
        ({"attributes": {"readGbps": "fast"}}, "spec.attributes.readGbps"),
        ({"dataSourceName": None}, "spec.dataSourceName"),
    ],
)
async def test_a_bad_claim_is_refused_naming_the_field(
    api: httpx.AsyncClient, change: dict[str, Any], field: str
) -> None:
    document = data_source_claim()
    document["spec"] |= change
    document["spec"] = {k: v for k, v in document["spec"].items() if v is not None}
    (item,) = (await apply(api, document)).json()["items"]
    assert (item["result"], item["code"]) == ("error", 422)
    assert field in [c["field"] for c in item["causes"]], item


async def test_needs_of_many_jobs_in_one_read(
    served: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    app, api = served
    reader = (await submit(api, job_document("reader"))).json()
    idle = (await submit(api, job_document("idle"))).json()
    await results(
        api,
        data_source(),
        data_source_claim("reads-corpus", workload="reader"),
        # Two claims of one job for the same data are one need; one for data no
        # DataSource describes yet is a need whose locality is unknown.
        data_source_claim("reads-corpus-again", workload="reader"),
        data_source_claim("reads-eval", workload="reader", source="eval-2027"),
    )
    async with app.state.sessions() as session:
        needs = await data_needs(
            session, job_ids=[uuid.UUID(reader["uid"]), uuid.UUID(idle["uid"]), uuid.uuid4()]
        )
    assert set(needs) == {uuid.UUID(reader["uid"]), uuid.UUID(idle["uid"])}
    assert needs[uuid.UUID(idle["uid"])].empty
    found = needs[uuid.UUID(reader["uid"])].datasets
    assert [(d.name, d.bound, d.clusters, d.claim) for d in found] == [
        ("corpus-v3", True, ("gpu-west",), "ml/reads-corpus"),
        ("eval-2027", False, (), "ml/reads-eval"),
    ]


async def test_a_hyperjob_reads_what_its_claim_names(
    served: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    app, api = served
    queue = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "llm"},
        "spec": {"weight": 1},
    }
    hyperjob = yaml.safe_load(example("hyperjob-llm-training.yaml"))
    claim = data_source_claim(namespace="llm", workload="llm-training", kind="HyperJob")
    response = await apply(api, queue, claim, hyperjob, data_source(clusters=("gpu-east",)))
    assert [i["result"] for i in response.json()["items"]] == ["created"] * 4, response.text
    uid = response.json()["items"][2]["uid"]
    (need,) = (await needs_of(app, uid)).datasets
    assert (need.name, need.clusters, need.claim) == (
        "corpus-v3",
        ("gpu-east",),
        "llm/train-corpus",
    )
