"""Queues and PriorityClasses through the Kubernetes-compatible API on each database:
discovery, list with selectors and paging, watch of a state change and a delete, create,
merge and strategic patches, the status subresource, refused deletes, roles, and the same
kinds applied through /api/v1/apply."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
import yaml
from fastapi import FastAPI

from tests.factories import job_document, priority_class
from tests.kube_api import listed_names, watch_for_a_second, watched_events
from volcano_global.services.kube.feed import ChangeFeed

QUEUES = "/k8s/apis/scheduling.volcano.sh/v1beta1/queues"
CLASSES = "/k8s/apis/scheduling.k8s.io/v1/priorityclasses"
JOBS = "/k8s/apis/batch.volcano.sh/v1alpha1/namespaces/ml/jobs"
MERGE = {"Content-Type": "application/merge-patch+json"}


@pytest.fixture
def feed(application: FastAPI, kube: httpx.AsyncClient) -> ChangeFeed:
    return application.state.kube_feed  # type: ignore[no-any-return]


def _queue(name: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name, "labels": labels},
        "spec": {"weight": 2, "capability": {"nvidia.com/gpu": 16}, "reclaimable": True},
    }


def _class(name: str, value: int) -> dict[str, Any]:
    return priority_class(name, value, description="training that may wait")


async def test_discovery_serves_both_kinds_cluster_scoped(kube: httpx.AsyncClient) -> None:
    volcano = (await kube.get("/k8s/apis/scheduling.volcano.sh/v1beta1")).json()
    (queue,) = [r for r in volcano["resources"] if r["name"] == "queues"]
    assert queue["namespaced"] is False and queue["shortNames"] == ["q", "queue-v1beta1"]
    k8s = (await kube.get("/k8s/apis/scheduling.k8s.io/v1")).json()
    (pc,) = [r for r in k8s["resources"] if r["name"] == "priorityclasses"]
    assert pc["namespaced"] is False and pc["shortNames"] == ["pc"]
    v3 = (await kube.get("/k8s/openapi/v3/apis/scheduling.volcano.sh/v1beta1")).json()
    schemas = v3["components"]["schemas"]
    assert (
        "capability"
        in schemas["sh.volcano.scheduling.v1beta1.Queue"]["properties"]["spec"]["properties"]
    )
    # A cluster-scoped kind has no namespaced paths.
    assert (
        await kube.get("/k8s/apis/scheduling.volcano.sh/v1beta1/namespaces/ml/queues")
    ).status_code == 404


async def test_create_list_select_page_and_status(kube: httpx.AsyncClient) -> None:
    for name, team in (("a", "llm"), ("b", "vision"), ("c", "llm")):
        created = await kube.post(QUEUES, json=_queue(name, team=team))
        assert created.status_code == 201, created.text
    assert listed_names(await kube.get(QUEUES, params={"labelSelector": "team=llm"})) == ["a", "c"]
    first = await kube.get(QUEUES, params={"limit": "2"})
    assert listed_names(first) == ["a", "b"]
    rest = await kube.get(
        QUEUES, params={"limit": "2", "continue": first.json()["metadata"]["continue"]}
    )
    assert listed_names(rest) == ["c", "default"]
    job = job_document("j1")
    job["spec"]["queue"] = "a"
    assert (await kube.post(JOBS, json=job)).status_code == 201
    got = (await kube.get(f"{QUEUES}/a/status")).json()
    assert got["status"]["state"] == "Open" and got["status"]["pending"] == 1
    assert got["status"]["allocated"] == {"nvidia.com/gpu": "0"}
    assert got["spec"]["capability"] == {"nvidia.com/gpu": 16}
    again = await kube.post(QUEUES, json=_queue("a"))
    assert again.status_code == 409 and again.json()["kind"] == "Status"


async def test_watch_sees_a_state_change_and_a_delete(
    kube: httpx.AsyncClient, feed: ChangeFeed
) -> None:
    created = (await kube.post(QUEUES, json=_queue("w"))).json()
    closed = await kube.patch(
        f"{QUEUES}/w/status", content=json.dumps({"status": {"state": "Closed"}}), headers=MERGE
    )
    assert closed.status_code == 200 and closed.json()["status"]["state"] == "Closed"
    # Resumed from the create: the state change is replayed from the table.
    events = await watch_for_a_second(kube, QUEUES, created["metadata"]["resourceVersion"])
    assert [(e["type"], e["object"]["status"]["state"]) for e in events] == [("MODIFIED", "Closed")]
    # A delete is seen by a watch open while it happens (the row is gone afterwards).
    watching = asyncio.create_task(
        kube.get(QUEUES, params={"watch": "true", "timeoutSeconds": "2"})
    )
    await feed.next_read()  # the watch subscribed: the feed reads only while one is open
    assert (await kube.delete(f"{QUEUES}/w")).status_code == 200
    events = watched_events(await watching)
    assert ("DELETED", "w") in [(e["type"], e["object"]["metadata"]["name"]) for e in events]


async def test_refusals_name_why(kube: httpx.AsyncClient) -> None:
    await kube.post(QUEUES, json=_queue("busy"))
    job = job_document("held")
    job["spec"]["queue"] = "busy"
    assert (await kube.post(JOBS, json=job)).status_code == 201
    busy = await kube.delete(f"{QUEUES}/busy")
    assert busy.status_code == 409 and "1 unfinished jobs" in busy.json()["message"]
    default = await kube.delete(f"{QUEUES}/default")
    assert default.status_code == 409 and "default queue" in default.json()["message"]
    system = await kube.delete(f"{CLASSES}/system-cluster-critical")
    assert system.status_code == 409 and "built-in" in system.json()["message"]
    bad = _queue("bad")
    bad["spec"]["weight"] = 0
    refused = await kube.post(QUEUES, json=bad)
    assert refused.status_code == 422
    assert refused.json()["details"]["causes"][0]["field"] == "spec.weight"
    reserved = await kube.post(CLASSES, json=_class("system-mine", 5))
    assert reserved.status_code == 422
    assert reserved.json()["details"]["causes"][0]["field"] == "metadata.name"
    await kube.post(CLASSES, json=_class("batch", 100))
    immutable = await kube.patch(f"{CLASSES}/batch", content='{"value": 7}', headers=MERGE)
    assert immutable.status_code == 422
    assert immutable.json()["details"]["causes"][0]["field"] == "value"
    directive = await kube.patch(
        f"{CLASSES}/batch",
        content='{"metadata": {"$retainKeys": []}}',
        headers={"Content-Type": "application/strategic-merge-patch+json"},
    )
    assert directive.status_code == 422
    strategic_queue = await kube.patch(
        f"{QUEUES}/busy",
        content="{}",
        headers={"Content-Type": "application/strategic-merge-patch+json"},
    )
    assert strategic_queue.status_code == 415


async def test_classes_patch_watch_and_table(kube: httpx.AsyncClient) -> None:
    created = await kube.post(CLASSES, json=_class("batch", 100))
    assert created.status_code == 201
    patched = await kube.patch(
        f"{CLASSES}/batch",
        content=json.dumps({"metadata": {"labels": {"tier": "low"}}, "globalDefault": True}),
        headers={"Content-Type": "application/strategic-merge-patch+json"},
    )
    assert patched.status_code == 200, patched.text
    assert patched.json()["globalDefault"] is True
    assert patched.json()["metadata"]["labels"] == {"tier": "low"}
    events = await watch_for_a_second(kube, CLASSES, created.json()["metadata"]["resourceVersion"])
    assert [
        (e["type"], e["object"]["metadata"]["name"], e["object"].get("globalDefault"))
        for e in events
    ] == [("MODIFIED", "batch", True)]
    table = (
        await kube.get(
            CLASSES,
            params={"labelSelector": "tier=low"},
            headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"},
        )
    ).json()
    assert [c["name"] for c in table["columnDefinitions"]] == [
        "Name",
        "VALUE",
        "GLOBAL-DEFAULT",
        "AGE",
        "PREEMPTIONPOLICY",
    ]
    (row,) = table["rows"]
    assert row["cells"][:3] == ["batch", 100, True] and row["cells"][4] == "PreemptLowerPriority"


async def test_roles_are_the_rest_apis(kube: httpx.AsyncClient) -> None:
    issued = await kube.post(
        "/api/v1/tokens", json={"name": "user", "role": "queue-user", "queues": ["default"]}
    )
    user = {"Authorization": f"Bearer {issued.json()['token']}"}
    await kube.post(QUEUES, json=_queue("other"))
    assert listed_names(await kube.get(QUEUES, headers=user)) == ["default"]
    assert (await kube.get(f"{QUEUES}/other", headers=user)).status_code == 403
    assert (await kube.post(QUEUES, json=_queue("mine"), headers=user)).status_code == 403
    assert (await kube.post(CLASSES, json=_class("mine", 1), headers=user)).status_code == 403
    assert (await kube.delete(f"{QUEUES}/other", headers=user)).status_code == 403
    assert "system-node-critical" in listed_names(await kube.get(CLASSES, headers=user))


def _file(queue_state: str | None = None, value: int = 1000) -> str:
    queue = _queue("team")
    if queue_state:
        queue["status"] = {"state": queue_state}
    job = job_document("uses-both")
    job["spec"]["queue"] = "team"
    job["spec"]["priorityClassName"] = "urgent"
    return yaml.safe_dump_all([queue, _class("urgent", value), job])


async def test_apply_file_with_a_queue_a_class_and_a_job(kube: httpx.AsyncClient) -> None:
    yaml_headers = {"Content-Type": "application/yaml"}
    first = await kube.post("/api/v1/apply", content=_file(), headers=yaml_headers)
    assert [i["result"] for i in first.json()["items"]] == ["created", "created", "created"], (
        first.text
    )
    again = await kube.post("/api/v1/apply", content=_file(), headers=yaml_headers)
    assert [i["result"] for i in again.json()["items"]] == ["unchanged"] * 3
    changed = _file().replace("training that may wait", "urgent training")
    third = await kube.post("/api/v1/apply", content=changed, headers=yaml_headers)
    assert [i["result"] for i in third.json()["items"]] == ["unchanged", "configured", "unchanged"]
    immutable = await kube.post("/api/v1/apply", content=_file(value=5), headers=yaml_headers)
    assert immutable.json()["items"][1]["causes"][0]["field"] == "value"
    # Closed through the file: the job already there stays, a new one is refused.
    closed = await kube.post("/api/v1/apply", content=_file("Closed"), headers=yaml_headers)
    assert closed.json()["items"][0]["result"] == "configured"
    job = job_document("late")
    job["spec"]["queue"] = "team"
    refused = await kube.post(JOBS, json=job)
    assert refused.status_code == 409 and "Closed" in refused.text
    # A file without status keeps the queue Closed.
    kept = await kube.post("/api/v1/apply", content=_file(), headers=yaml_headers)
    assert kept.json()["items"][0]["result"] == "unchanged"
    assert (await kube.get(f"{QUEUES}/team")).json()["status"]["state"] == "Closed"
