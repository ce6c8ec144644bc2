"""The Kubernetes-compatible API through HTTP on each database: discovery, selectors,
paging, tables, watch resume, bookmarks and 410 Expired, patches, roles."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
from fastapi import FastAPI

from tests.conftest import app_settings
from tests.factories import job_document
from tests.kube_api import kube_client, listed_names, watch_for_a_second, watched_events
from volcano_global.app import create_app
from volcano_global.db.models import Job

JOBS = "/k8s/apis/batch.volcano.sh/v1alpha1/namespaces/ml/jobs"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


def _job(name: str, **labels: str) -> dict[str, Any]:
    document = job_document(name)
    document["metadata"]["labels"] = labels
    return document


async def _create(kube: httpx.AsyncClient, name: str, **labels: str) -> dict[str, Any]:
    created = await kube.post(JOBS, json=_job(name, **labels))
    assert created.status_code == 201, created.text
    return created.json()


async def test_discovery_names_the_kinds(kube: httpx.AsyncClient) -> None:
    groups = (await kube.get("/k8s/apis")).json()
    assert {g["name"] for g in groups["groups"]} == {
        "batch.volcano.sh",
        "training.volcano.sh",
        "scheduling.volcano.sh",
        "scheduling.k8s.io",
        "datadependency.volcano.sh",
    }
    resources = (await kube.get("/k8s/apis/batch.volcano.sh/v1alpha1")).json()["resources"]
    jobs = next(r for r in resources if r["name"] == "jobs")
    assert jobs["kind"] == "Job" and jobs["shortNames"] == ["vcjob", "vj"] and jobs["namespaced"]
    assert "watch" in jobs["verbs"] and "patch" in jobs["verbs"]
    index = (await kube.get("/k8s/openapi/v3")).json()["paths"]
    document = (await kube.get(index["apis/batch.volcano.sh/v1alpha1"]["serverRelativeURL"])).json()
    schema = document["components"]["schemas"]["sh.volcano.batch.v1alpha1.Job"]
    assert "tasks" in schema["properties"]["spec"]["properties"]
    assert (await kube.get("/k8s/version")).json()["major"] == "1"
    assert (await kube.get("/k8s/apis", headers={"Authorization": ""})).status_code == 401


async def test_label_and_field_selectors(kube: httpx.AsyncClient) -> None:
    await _create(kube, "a", team="llm", tier="gold")
    await _create(kube, "b", team="vision")
    await _create(kube, "c")
    select = {
        "team=llm": ["a"],
        "team!=llm": ["b", "c"],
        "team in (llm, vision)": ["a", "b"],
        "team notin (llm)": ["b", "c"],
        "team": ["a", "b"],
        "!team": ["c"],
        "team=llm,tier=gold": ["a"],
        "team=llm,tier=silver": [],
    }
    for selector, names in select.items():
        assert listed_names(await kube.get(JOBS, params={"labelSelector": selector})) == names, (
            selector
        )
    by_name = await kube.get(JOBS, params={"fieldSelector": "metadata.name=b"})
    assert listed_names(by_name) == ["b"]
    refused = await kube.get(JOBS, params={"fieldSelector": "spec.queue=x"})
    assert refused.status_code == 400  # as kube-apiserver answers a selector it cannot use
    assert refused.json()["details"]["causes"][0]["field"] == "fieldSelector"
    # Another namespace sees none of them; all namespaces see all.
    other = "/k8s/apis/batch.volcano.sh/v1alpha1/namespaces/other/jobs"
    assert listed_names(await kube.get(other)) == []
    assert listed_names(await kube.get("/k8s/apis/batch.volcano.sh/v1alpha1/jobs")) == [
        "a",
        "b",
        "c",
    ]


async def test_limit_and_continue_page_in_name_order(kube: httpx.AsyncClient) -> None:
    for name in ("e", "b", "d", "a", "c"):
        await _create(kube, name, keep="yes" if name != "b" else "no")
    seen, token, pages = [], None, 0
    while True:
        params = {
            "limit": "2",
            "labelSelector": "keep=yes",
            **({"continue": token} if token else {}),
        }
        page = (await kube.get(JOBS, params=params)).json()
        seen += [item["metadata"]["name"] for item in page["items"]]
        pages += 1
        token = page["metadata"].get("continue")
        if not token:
            break
    assert seen == ["a", "c", "d", "e"]
    assert pages == 2


async def test_table_has_volcano_columns_and_clusters(kube: httpx.AsyncClient) -> None:
    await _create(kube, "t")
    table = (await kube.get(JOBS, headers={"Accept": TABLE})).json()
    assert table["kind"] == "Table"
    assert [c["name"] for c in table["columnDefinitions"]] == [
        "Name",
        "STATUS",
        "minAvailable",
        "RUNNINGS",
        "AGE",
        "QUEUE",
        "CLUSTERS",
        "DURATION",
    ]
    (row,) = table["rows"]
    assert row["cells"][:4] == ["t", "Pending", 2, 0]
    assert row["cells"][5:] == ["default", "<none>", "<none>"]
    assert row["object"]["kind"] == "PartialObjectMetadata"


async def test_watch_resumes_from_a_resource_version(kube: httpx.AsyncClient) -> None:
    first = await _create(kube, "w1")
    start = first["metadata"]["resourceVersion"]
    await _create(kube, "w2")
    patched = await kube.patch(
        f"{JOBS}/w1",
        content=json.dumps({"metadata": {"labels": {"seen": "yes"}}}),
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert patched.status_code == 200, patched.text
    events = await watch_for_a_second(kube, JOBS, start)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "w2"),
        ("MODIFIED", "w1"),
    ]
    assert events[1]["object"]["metadata"]["labels"] == {"seen": "yes"}
    # From the newest version: nothing more, then a bookmark at that version when allowed.
    newest = events[-1]["object"]["metadata"]["resourceVersion"]
    quiet = watched_events(
        await kube.get(
            JOBS,
            params={
                "watch": "1",
                "resourceVersion": newest,
                "timeoutSeconds": "1",
                "allowWatchBookmarks": "true",
            },
        )
    )
    assert quiet and {e["type"] for e in quiet} == {"BOOKMARK"}
    assert quiet[0]["object"]["metadata"]["resourceVersion"] == newest
    # Without a version: the current objects as ADDED.
    current = await watch_for_a_second(kube, JOBS)
    assert sorted((e["type"], e["object"]["metadata"]["name"]) for e in current) == [
        ("ADDED", "w1"),
        ("ADDED", "w2"),
    ]


async def test_watch_sees_a_delete(kube: httpx.AsyncClient) -> None:
    created = await _create(kube, "gone")
    deleted = await kube.delete(f"{JOBS}/gone")
    assert deleted.json()["status"]["state"]["phase"] == "Aborted"
    events = await watch_for_a_second(kube, JOBS, created["metadata"]["resourceVersion"])
    assert [e["type"] for e in events] == ["DELETED"]
    assert (await kube.get(f"{JOBS}/gone")).status_code == 404
    assert (await kube.get(f"/api/v1/jobs/{created['metadata']['uid']}")).json()["state"] == (
        "Cancelled"
    )


async def test_an_expired_resource_version_is_410(database_url: str) -> None:
    settings = app_settings(database_url, kube={"watch_window_s": 0.001})
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        async with kube_client(application) as kube:
            old = (await _create(kube, "old"))["metadata"]["resourceVersion"]
            await _create(kube, "new")
            events = watched_events(
                await kube.get(JOBS, params={"watch": "true", "resourceVersion": old})
            )
    assert len(events) == 1 and events[0]["type"] == "ERROR"
    assert events[0]["object"]["code"] == 410 and events[0]["object"]["reason"] == "Expired"


async def test_patch_changes_labels_only(kube: httpx.AsyncClient) -> None:
    await _create(kube, "p")
    merge = {"Content-Type": "application/merge-patch+json"}
    spec = await kube.patch(
        f"{JOBS}/p", content=json.dumps({"spec": {"queue": "other"}}), headers=merge
    )
    assert spec.status_code == 422
    assert spec.json()["details"]["causes"][0]["field"] == "spec"
    assert spec.json()["message"].startswith('Job.batch.volcano.sh "p" is invalid: spec: ')
    strategic = await kube.patch(
        f"{JOBS}/p",
        content="{}",
        headers={"Content-Type": "application/strategic-merge-patch+json"},
    )
    assert strategic.status_code == 415
    missing = await kube.patch(f"{JOBS}/nope", content="{}", headers=merge)
    assert missing.status_code == 404
    assert missing.json()["message"] == 'jobs.batch.volcano.sh "nope" not found'


async def test_create_refusals_are_status_objects(kube: httpx.AsyncClient) -> None:
    await _create(kube, "dup")
    again = await kube.post(JOBS, json=_job("dup"))
    assert again.status_code == 409 and again.json()["kind"] == "Status"
    unknown = _job("u")
    unknown["spec"]["bogus"] = 1
    strict = await kube.post(JOBS, params={"fieldValidation": "Strict"}, json=unknown)
    assert strict.status_code == 422
    assert strict.json()["details"]["causes"][0]["field"] == "spec.bogus"
    elsewhere = _job("x")
    elsewhere["metadata"]["namespace"] = "other"
    wrong = await kube.post(JOBS, json=elsewhere)
    assert wrong.status_code == 422
    assert wrong.json()["details"]["causes"][0]["field"] == "metadata.namespace"
    dry = await kube.post(JOBS, params={"dryRun": "All"}, json=_job("dry"))
    assert dry.status_code == 201
    assert (await kube.get(f"{JOBS}/dry")).status_code == 404


async def test_roles_are_the_rest_apis(kube: httpx.AsyncClient) -> None:
    await kube.post("/api/v1/queues", json={"name": "llm"})
    theirs = _job("theirs")
    theirs["spec"]["queue"] = "llm"
    assert (await kube.post(JOBS, json=theirs)).status_code == 201
    await _create(kube, "ours")
    issued = await kube.post("/api/v1/tokens", json={"name": "reader", "role": "reader"})
    reader = {"Authorization": f"Bearer {issued.json()['token']}"}
    assert listed_names(await kube.get(JOBS, headers=reader)) == ["ours", "theirs"]
    refused = await kube.post(JOBS, json=_job("mine"), headers=reader)
    assert refused.status_code == 403 and refused.json()["kind"] == "Status"
    assert (await kube.delete(f"{JOBS}/ours", headers=reader)).status_code == 403
    issued = await kube.post(
        "/api/v1/tokens",
        json={"name": "user", "role": "queue-user", "queues": ["default"]},
    )
    user = {"Authorization": f"Bearer {issued.json()['token']}"}
    assert listed_names(await kube.get(JOBS, headers=user)) == ["ours"]
    assert (await kube.get(f"{JOBS}/theirs", headers=user)).status_code == 403
    assert (await kube.delete(f"{JOBS}/theirs", headers=user)).status_code == 403
    assert (await kube.delete(f"{JOBS}/ours", headers=user)).status_code == 200


EVENTS = "/k8s/api/v1/namespaces/ml/events"


async def test_events_of_a_job_as_kubectl_describe_selects_them(kube: httpx.AsyncClient) -> None:
    created = await _create(kube, "ev")
    uid = created["metadata"]["uid"]
    selector = f"involvedObject.name=ev,involvedObject.namespace=ml,involvedObject.kind=Job,involvedObject.uid={uid}"
    listed = (await kube.get(EVENTS, params={"fieldSelector": selector, "limit": "500"})).json()
    assert listed["kind"] == "EventList"
    (event,) = listed["items"]
    assert event["reason"] == "Submitted" and event["type"] == "Normal"
    assert event["involvedObject"] == {
        "kind": "Job",
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "namespace": "ml",
        "name": "ev",
        "uid": uid,
    }
    # Another job's name, kind or namespace: none of this job's events.
    for other in (
        "involvedObject.name=nope",
        "involvedObject.name=ev,involvedObject.kind=Pod",
        "involvedObject.name=ev,involvedObject.namespace=other",
    ):
        assert (await kube.get(EVENTS, params={"fieldSelector": other})).json()["items"] == []
    assert (await kube.get(EVENTS)).json()["items"] == []  # the Global keeps no other events
    refused = await kube.get(EVENTS, params={"fieldSelector": "reason=Submitted"})
    assert refused.status_code == 400
    assert "fieldSelector" in refused.text


async def test_a_job_stored_before_estimates_were_checked_still_takes_a_label(
    application: FastAPI, kube: httpx.AsyncClient
) -> None:
    # Submission now refuses a runningEstimate that is not a Go duration ("2h30"); a job
    # stored before that (its spec cannot change here) still takes labels and annotations.
    created = await _create(kube, "old")
    async with application.state.sessions() as session:
        job = await session.get(Job, uuid.UUID(created["metadata"]["uid"]))
        assert job is not None
        job.manifest = {**job.manifest, "spec": {**job.manifest["spec"], "runningEstimate": "2h30"}}
        await session.commit()
    merge = {"Content-Type": "application/merge-patch+json"}
    labelled = await kube.patch(
        f"{JOBS}/old", content=json.dumps({"metadata": {"labels": {"team": "a"}}}), headers=merge
    )
    assert labelled.status_code == 200, labelled.text
    assert labelled.json()["metadata"]["labels"]["team"] == "a"
    assert labelled.json()["spec"]["runningEstimate"] == "2h30"
