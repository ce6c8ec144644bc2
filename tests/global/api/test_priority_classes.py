"""PriorityClasses as resources: built-ins, seeds, create, globalDefault, resolution."""

from __future__ import annotations

import httpx

from tests.factories import job_document, priority_class, queue_document, submit


async def test_built_ins_and_seeds_exist_from_the_start(api: httpx.AsyncClient) -> None:
    items = {
        c["metadata"]["name"]: c for c in (await api.get("/api/v1/priorityclasses")).json()["items"]
    }
    assert items["system-cluster-critical"]["value"] == 2_000_000_000
    assert items["system-node-critical"]["value"] == 2_000_001_000
    assert items["system-node-critical"]["builtIn"] is True
    assert items["high-priority"]["value"] == 1000  # seeded from the settings table
    assert items["high-priority"]["preemptionPolicy"] == "PreemptLowerPriority"
    assert (await api.delete("/api/v1/priorityclasses/system-node-critical")).status_code == 409
    # A built-in class is for the queues an admin granted it (issue 38), with its value.
    refused = await submit(api, job_document(priorityClassName="system-cluster-critical"))
    assert refused.status_code == 403
    assert "(rule: system priority classes)" in refused.json()["message"]
    granted = queue_document("system", **{"global.volcano.sh/system-priority": "true"})
    applied = await api.post("/api/v1/apply", json=granted)
    assert applied.json()["items"][0]["result"] == "created", applied.text
    job = await submit(
        api, job_document(queue="system", priorityClassName="system-cluster-critical")
    )
    assert job.status_code == 201, job.text
    assert job.json()["priority"] == 2_000_000_000


async def test_a_class_created_at_run_time_resolves_at_once(api: httpx.AsyncClient) -> None:
    unknown = await submit(api, job_document("early", priorityClassName="urgent"))
    assert unknown.status_code == 422
    assert unknown.json()["details"]["causes"][0]["field"] == "spec.priorityClassName"
    yaml_body = (
        "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata:\n  name: urgent\n"
        "value: 5000\npreemptionPolicy: Never\ndescription: on-call fixes\n"
    )
    created = await api.post(
        "/api/v1/priorityclasses", content=yaml_body, headers={"Content-Type": "application/yaml"}
    )
    assert created.status_code == 201, created.text
    assert created.json()["preemptionPolicy"] == "Never"
    job = await submit(api, job_document("late", priorityClassName="urgent"))
    assert job.status_code == 201, job.text
    assert (job.json()["priority"], job.json()["preemptionPolicy"]) == (5000, "Never")
    assert (
        await api.post("/api/v1/priorityclasses", json=priority_class("urgent", 1))
    ).status_code == 409
    # value is immutable; the description may change
    changed = await api.put(
        "/api/v1/priorityclasses/urgent",
        json=priority_class("urgent", 5000, preemptionPolicy="Never", description="fixes"),
    )
    assert changed.status_code == 200 and changed.json()["description"] == "fixes"
    moved = await api.put("/api/v1/priorityclasses/urgent", json=priority_class("urgent", 7))
    assert moved.status_code == 422
    assert moved.json()["details"]["causes"][0]["field"] == "value"
    assert (await api.delete("/api/v1/priorityclasses/urgent")).status_code == 204
    gone = await submit(api, job_document("later", priorityClassName="urgent"))
    assert gone.status_code == 422


async def test_one_global_default_used_for_jobs_naming_none(api: httpx.AsyncClient) -> None:
    before = await submit(api, job_document("before"))
    assert before.json()["priority"] == 0
    first = await api.post(
        "/api/v1/priorityclasses", json=priority_class("batch", 50, globalDefault=True)
    )
    assert first.status_code == 201, first.text
    second = await api.post(
        "/api/v1/priorityclasses", json=priority_class("other", 60, globalDefault=True)
    )
    assert second.status_code == 422
    assert second.json()["details"]["causes"][0] == {
        "field": "globalDefault",
        "message": "priority class batch is already marked as default; only one default can exist",
    }
    after = await submit(api, job_document("after"))
    assert after.status_code == 201
    assert after.json()["priority"] == 50


async def test_reserved_names_and_bad_fields_are_refused(api: httpx.AsyncClient) -> None:
    cases = [
        (priority_class("system-mine", 10), "metadata.name"),
        (priority_class("too-high", 1_000_000_001), "value"),
        (priority_class("bad", 1, preemptionPolicy="Sometimes"), "preemptionPolicy"),
        (priority_class("bad", 1, globalDefault="yes"), "globalDefault"),
        ({**priority_class("bad", 1), "apiVersion": "v1"}, "apiVersion"),
    ]
    for document, field in cases:
        response = await api.post("/api/v1/priorityclasses", json=document)
        assert response.status_code == 422, (field, response.text)
        assert response.json()["details"]["causes"][0]["field"] == field
