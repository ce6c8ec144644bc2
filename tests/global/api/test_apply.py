"""/api/v1/apply: a file of documents applied in order, one result each, idempotent by
namespace/name; unknown kinds answered per document without failing the others."""

from __future__ import annotations

import asyncio
import json

import httpx
import yaml

from tests.factories import example, job_document, volcano_queue

YAML = {"Content-Type": "application/yaml"}
QUEUE = volcano_queue("llm", weight=1)


async def apply(api: httpx.AsyncClient, *documents: object) -> list[dict[str, object]]:
    response = await api.post("/api/v1/apply", content=yaml.safe_dump_all(documents), headers=YAML)
    assert response.status_code == 200, response.text
    return response.json()["items"]


async def test_a_file_of_a_queue_and_jobs_applies_them_in_order(
    api: httpx.AsyncClient,
) -> None:
    hyperjob = yaml.safe_load(example("hyperjob-llm-training.yaml"))
    assert hyperjob["spec"]["replicatedJobs"][0]["templateSpec"]["queue"] == "llm"
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}}
    items = await apply(api, QUEUE, job_document("a", queue="llm"), hyperjob, deployment)
    assert [(i["index"], i["kind"], i["result"]) for i in items] == [
        (0, "Queue", "created"),
        (1, "Job", "created"),
        (2, "HyperJob", "created"),
        (3, "Deployment", "error"),
    ]
    assert items[3]["code"] == 422
    assert items[3]["message"].startswith(
        "document 3 (Deployment web): unknown kind Deployment (apps/v1); served: Job"
    )
    assert items[3]["causes"][0]["field"] == "kind"
    assert (await api.get("/api/v1/queues/llm")).json()["weight"] == 1
    jobs = (await api.get("/api/v1/jobs")).json()["items"]
    assert sorted(j["name"] for j in jobs) == ["a", "llm-training"]
    uid = {i["name"]: i["uid"] for i in items}["a"]
    assert (await api.get(f"/api/v1/jobs/{uid}")).json()["name"] == "a"

    again = await apply(api, QUEUE, job_document("a", queue="llm"), hyperjob)
    assert [i["result"] for i in again] == ["unchanged", "unchanged", "unchanged"]
    assert [i["uid"] for i in again] == [i["uid"] for i in items[:3]]
    assert len((await api.get("/api/v1/jobs")).json()["items"]) == 2
    heavier = {**QUEUE, "spec": {"weight": 4}}
    (configured,) = await apply(api, heavier)
    assert configured["result"] == "configured"
    assert (await api.get("/api/v1/queues/llm")).json()["weight"] == 4


async def test_a_changed_document_is_refused_and_a_finished_name_is_free(
    api: httpx.AsyncClient,
) -> None:
    (first,) = await apply(api, job_document("a"))
    (changed,) = await apply(api, job_document("a", replicas=4))
    assert (changed["result"], changed["code"]) == ("error", 409)
    assert "different document" in changed["message"]
    assert (await api.post(f"/api/v1/jobs/{first['uid']}/cancel")).status_code == 200
    (again,) = await apply(api, job_document("a", replicas=4))
    assert again["result"] == "created" and again["uid"] != first["uid"]


async def test_each_bad_document_fails_alone_naming_its_field(api: httpx.AsyncClient) -> None:
    bad = job_document("bad")
    bad["spec"]["policies"] = [{"events": "PodFailed", "action": "RestartJob"}]
    named = job_document("gen")
    del named["metadata"]["name"]
    named["metadata"]["generateName"] = "gen-"
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}}
    items = await apply(api, bad, named, deployment, job_document("good"))
    assert [i["result"] for i in items] == ["error", "error", "error", "created"]
    assert items[0]["causes"] == [
        {
            "field": "spec.policies[0].events",
            "message": "must be a list of events, e.g. [PodFailed]",
        }
    ]
    assert items[1]["causes"][0]["field"] == "metadata.name"
    assert "unknown kind Deployment (apps/v1)" in items[2]["message"]


async def test_unreadable_yaml_keeps_the_documents_before_it(api: httpx.AsyncClient) -> None:
    text = yaml.safe_dump(job_document("first")) + "---\nspec: [unclosed\n"
    response = await api.post("/api/v1/apply", content=text, headers=YAML)
    items = response.json()["items"]
    assert [i["result"] for i in items] == ["created", "error"]
    assert items[1]["message"].startswith("document 1 (unreadable) cannot be read")


async def test_a_json_list_is_applied_item_by_item(api: httpx.AsyncClient) -> None:
    body = {"apiVersion": "v1", "kind": "List", "items": [job_document("x"), job_document("y")]}
    response = await api.post(
        "/api/v1/apply", content=json.dumps(body), headers={"Content-Type": "application/json"}
    )
    assert [i["result"] for i in response.json()["items"]] == ["created", "created"]


async def test_the_same_file_applied_twice_at_once_creates_each_job_once(
    api: httpx.AsyncClient,
) -> None:
    documents = [job_document(f"job-{i}") for i in range(3)]
    first, second = await asyncio.gather(apply(api, *documents), apply(api, *documents))
    results = sorted(a["result"] + "/" + b["result"] for a, b in zip(first, second, strict=True))
    assert all(r in ("created/unchanged", "unchanged/created") for r in results), results
    assert len((await api.get("/api/v1/jobs")).json()["items"]) == 3


async def test_the_readmes_example_queue_and_priority_class_apply_and_serve_its_job(
    api: httpx.AsyncClient,
) -> None:
    # README "Using it": the queue and the PriorityClass it applies, then its example job.
    documents = [
        yaml.safe_load(example(name)) for name in ("queue-llm.yaml", "priorityclass-urgent.yaml")
    ]
    items = await apply(api, *documents)
    assert [(i["kind"], i["result"]) for i in items] == [
        ("Queue", "created"),
        ("PriorityClass", "created"),
    ]
    queue = (await api.get("/api/v1/queues/llm")).json()
    assert (queue["weight"], queue["gpuQuota"]) == (4, 2048)
    job = yaml.safe_load(example("llm-pretrain-64x8.yaml"))
    job["spec"]["priorityClassName"] = "urgent"
    (submitted,) = await apply(api, job)
    assert submitted["result"] == "created", submitted
