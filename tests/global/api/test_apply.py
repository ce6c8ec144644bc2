"""/api/v1/apply: a file of documents (Queues, PriorityClasses, jobs) applied in order, one
result each, idempotent by name; a bad or unknown document answered alone, the others applied."""

from __future__ import annotations

import asyncio
import json

import httpx
import yaml

from tests.factories import example, job_document

YAML = {"Content-Type": "application/yaml"}
QUEUE = {
    "apiVersion": "scheduling.volcano.sh/v1beta1",
    "kind": "Queue",
    "metadata": {"name": "llm"},
    "spec": {"weight": 1},
}


async def apply(api: httpx.AsyncClient, *documents: object) -> list[dict[str, object]]:
    response = await api.post("/api/v1/apply", content=yaml.safe_dump_all(documents), headers=YAML)
    assert response.status_code == 200, response.text
    return response.json()["items"]


PRIORITY_CLASS = {
    "apiVersion": "scheduling.k8s.io/v1",
    "kind": "PriorityClass",
    "metadata": {"name": "production"},
    "value": 1000,
}


async def test_a_file_of_a_queue_a_class_and_jobs_applies_each_in_order(
    api: httpx.AsyncClient,
) -> None:
    hyperjob = yaml.safe_load(example("hyperjob-llm-training.yaml"))
    job = job_document("a", queue="llm", priorityClassName="production")
    items = await apply(api, QUEUE, PRIORITY_CLASS, job, hyperjob)
    assert [(i["index"], i["kind"], i["result"]) for i in items] == [
        (0, "Queue", "created"),
        (1, "PriorityClass", "created"),
        (2, "Job", "created"),
        (3, "HyperJob", "created"),
    ]
    queue = (await api.get("/api/v1/queues/llm")).json()
    assert (queue["weight"], queue["state"]) == (1, "Open")
    assert (await api.get("/api/v1/priorityclasses/production")).json()["value"] == 1000
    jobs = (await api.get("/api/v1/jobs")).json()["items"]
    assert sorted(j["name"] for j in jobs) == ["a", "llm-training"]
    uid = {i["name"]: i["uid"] for i in items}["a"]
    assert (await api.get(f"/api/v1/jobs/{uid}")).json()["priority"] == 1000

    again = await apply(api, QUEUE, PRIORITY_CLASS, job, hyperjob)
    assert [i["result"] for i in again] == ["unchanged"] * 4
    assert [i["uid"] for i in again[2:]] == [i["uid"] for i in items[2:]]
    assert len((await api.get("/api/v1/jobs")).json()["items"]) == 2

    wider = {**QUEUE, "spec": {"weight": 3}}
    described = {**PRIORITY_CLASS, "description": "serving"}
    changed = await apply(api, wider, described)
    assert [i["result"] for i in changed] == ["configured", "configured"]
    assert (await api.get("/api/v1/queues/llm")).json()["weight"] == 3


async def test_queues_and_classes_in_a_file_are_an_admins_and_checked(
    api: httpx.AsyncClient,
) -> None:
    immutable = {**PRIORITY_CLASS, "value": 1}
    assert [i["result"] for i in await apply(api, PRIORITY_CLASS)] == ["created"]
    bad_queue = {**QUEUE, "spec": {"weight": 0}}
    items = await apply(api, bad_queue, immutable, job_document("after"))
    assert [(i["result"], i["code"]) for i in items] == [
        ("error", 422),
        ("error", 422),
        ("created", None),
    ]
    assert items[0]["causes"][0]["field"] == "spec.weight"
    assert items[1]["causes"][0]["field"] == "value"

    issued = await api.post(
        "/api/v1/tokens", json={"name": "user", "role": "queue-user", "queues": ["default"]}
    )
    user = {**YAML, "Authorization": f"Bearer {issued.json()['token']}"}
    response = await api.post(
        "/api/v1/apply", content=yaml.safe_dump_all([QUEUE, job_document("mine")]), headers=user
    )
    assert [(i["result"], i["code"]) for i in response.json()["items"]] == [
        ("error", 403),
        ("created", None),
    ]
    assert (await api.get("/api/v1/queues/llm")).status_code == 404


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
