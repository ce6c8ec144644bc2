"""The unified job API over REST: submission as YAML or JSON, listing, cancel, events."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from tests.factories import BILLION_LAUGHS, create_queue, example, job_document, submit, to_yaml


async def test_submit_yaml_stores_the_document_as_received(api: httpx.AsyncClient) -> None:
    await create_queue(api, "llm")
    text = example("llm-pretrain-64x8.yaml")
    response = await submit(api, text)
    assert response.status_code == 201, response.text
    job = response.json()
    assert (job["state"], job["queue"], job["totalGpus"], job["gpuModel"]) == (
        "Pending",
        "llm",
        512,
        "H100",
    )
    assert job["pendingReason"] == "waiting for the scheduler's next round"
    assert job["splitPolicy"]["mode"] == "auto"
    assert job["communication"]["dataParallel"] == 16
    assert job["manifest"]["metadata"]["annotations"]["global.volcano.sh/max-clusters"] == "3"
    assert job["placement"] is None
    assert job["clusters"] == []
    fetched = (await api.get(f"/api/v1/jobs/{job['uid']}")).json()
    assert fetched["gang"] == job["gang"]
    assert fetched["timestamps"]["submittedAt"] == job["timestamps"]["submittedAt"]
    events = (await api.get(f"/api/v1/jobs/{job['uid']}/events")).json()["items"]
    assert events[0]["reason"] == "Submitted"
    assert "512 GPUs submitted to queue llm by admin; may be split" in events[0]["message"]


async def test_submit_json_and_yaml_of_the_same_job_agree(api: httpx.AsyncClient) -> None:
    doc = job_document("a")
    from_json = (await submit(api, doc)).json()
    doc["metadata"]["name"] = "b"
    from_yaml = (await submit(api, to_yaml(doc))).json()
    assert from_json["gang"] == from_yaml["gang"]


async def test_a_name_is_taken_until_its_job_is_deleted(api: httpx.AsyncClient) -> None:
    # As in Kubernetes (and `kubectl create` here): a finished job keeps its name until it
    # is deleted.
    first = (await submit(api, job_document("train"))).json()
    response = await submit(api, job_document("train"))
    assert response.status_code == 409
    assert response.json()["message"] == "job ml/train already exists and has not finished"
    other_namespace = job_document("train")
    other_namespace["metadata"]["namespace"] = "default"
    assert (await submit(api, other_namespace)).status_code == 201
    await api.post(f"/api/v1/jobs/{first['uid']}/cancel")
    finished = await submit(api, job_document("train"))
    assert finished.status_code == 409
    assert finished.json()["message"] == (
        "job ml/train already exists (Cancelled): delete it first (vglobal delete ml/train) or "
        "choose another name"
    )
    deleted = await api.delete(f"/api/v1/jobs/{first['uid']}")
    assert (deleted.status_code, deleted.json()["state"]) == (200, "Cancelled")
    again = await submit(api, job_document("train"))
    assert again.status_code == 201
    assert again.json()["uid"] != first["uid"]
    assert (await api.get(f"/api/v1/jobs/{first['uid']}")).status_code == 200  # its history


async def test_deleting_a_running_job_cancels_it(api: httpx.AsyncClient) -> None:
    uid = (await submit(api, job_document("train"))).json()["uid"]
    deleted = (await api.delete(f"/api/v1/jobs/{uid}")).json()
    assert deleted["state"] == "Cancelled"
    assert (await submit(api, job_document("train"))).status_code == 201


async def test_simultaneous_submissions_of_one_name_store_one_job(api: httpx.AsyncClient) -> None:
    answers = await asyncio.gather(*(submit(api, job_document("race")) for _ in range(8)))
    assert sorted(a.status_code for a in answers) == [201] + [409] * 7
    assert {a.json()["message"] for a in answers if a.status_code == 409} == {
        "job ml/race already exists and has not finished"
    }
    listed = (await api.get("/api/v1/jobs", params={"name": "race"})).json()["items"]
    assert len(listed) == 1


async def test_a_running_estimate_is_a_duration_of_at_most_a_year(api: httpx.AsyncClient) -> None:
    assert (
        await submit(api, job_document("estimate-1", runningEstimate="8784h"))
    ).status_code == 201
    # Not a duration at all ("forever", "1d"): refused, as Volcano's admission webhook cannot
    # decode it into a metav1.Duration; too long for a year, or too long for a number.
    for index, estimate in enumerate(["9" * 400 + "h", "8785h", "forever", "1d"], start=2):
        response = await submit(api, job_document(f"estimate-{index}", runningEstimate=estimate))
        assert response.status_code == 422
        assert response.json()["details"]["causes"][0]["field"] == "spec.runningEstimate"


async def test_invalid_job_gets_422_with_field_paths(api: httpx.AsyncClient) -> None:
    doc = job_document()
    doc["spec"]["tasks"].append(
        {"name": "extra", "replicas": -1, "template": {"spec": {"containers": [{"name": "c"}]}}}
    )
    response = await submit(api, to_yaml(doc))
    assert response.status_code == 422
    body = response.json()
    assert body["kind"] == "Status"
    assert body["reason"] == "Invalid"
    assert body["message"] == "spec.tasks[1].replicas: must be >= 0"
    assert body["details"]["causes"] == [
        {"field": "spec.tasks[1].replicas", "message": "must be >= 0"}
    ]


async def test_unknown_queue_and_kind_are_refused(api: httpx.AsyncClient) -> None:
    response = await submit(api, job_document(queue="nope"))
    assert response.status_code == 422
    assert response.json()["message"] == "spec.queue: queue 'nope' does not exist"
    # A misspelt queue in a namespace no queue of that name could use: still the queue named,
    # not a 403 about the namespace.
    misspelt = job_document(queue="lm")
    misspelt["metadata"]["namespace"] = "llm"
    response = await submit(api, misspelt)
    assert response.status_code == 422, response.text
    assert response.json()["message"] == "spec.queue: queue 'lm' does not exist"
    doc = job_document()
    doc["kind"] = "PyTorchJob"
    response = await submit(api, doc)
    assert response.status_code == 422
    assert response.json()["details"]["causes"][0]["field"] == "kind"


async def test_bodies_that_are_too_big_or_not_documents(api: httpx.AsyncClient) -> None:
    response = await api.post(
        "/api/v1/jobs", content=b"a" * (2 << 20), headers={"Content-Type": "application/yaml"}
    )
    assert response.status_code == 413
    assert response.json()["message"] == "request body larger than 1048576 bytes"

    async def chunks():  # type: ignore[no-untyped-def]
        for _ in range(40):
            yield b"#" * 65536

    response = await api.post(
        "/api/v1/jobs", content=chunks(), headers={"Content-Type": "application/yaml"}
    )
    assert response.status_code == 413

    response = await api.post(
        "/api/v1/jobs", content=BILLION_LAUGHS, headers={"Content-Type": "application/yaml"}
    )
    assert response.status_code == 422
    assert response.json()["message"] == "document expands to more than 200000 nodes"

    nested = '{"a": ' + "[" * 5000 + "]" * 5000 + "}"
    response = await api.post(
        "/api/v1/jobs", content=nested, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 422
    assert "nests deeper" in response.json()["message"]

    response = await api.post("/api/v1/jobs", content=b"x", headers={"Content-Type": "text/plain"})
    assert response.status_code == 415


async def test_list_filters_and_pages(api: httpx.AsyncClient) -> None:
    await create_queue(api, "llm")
    uids = []
    for i in range(7):
        response = await submit(api, job_document(f"job-{i}", queue="llm" if i % 2 else "default"))
        uids.append(response.json()["uid"])
    await api.post(f"/api/v1/jobs/{uids[0]}/cancel")

    seen: list[str] = []
    params: dict[str, str | int] = {"limit": 3}
    pages = 0
    while True:
        page = (await api.get("/api/v1/jobs", params=params)).json()
        seen.extend(j["uid"] for j in page["items"])
        pages += 1
        if not page["metadata"]["continue"]:
            break
        params["continue"] = page["metadata"]["continue"]
    assert pages == 3
    assert seen == list(reversed(uids))  # newest first, no gaps or repeats

    llm = (await api.get("/api/v1/jobs", params={"queue": "llm"})).json()["items"]
    assert {j["name"] for j in llm} == {"job-1", "job-3", "job-5"}
    cancelled = (await api.get("/api/v1/jobs", params={"state": "Cancelled"})).json()["items"]
    assert [j["name"] for j in cancelled] == ["job-0"]
    named = (await api.get("/api/v1/jobs", params={"name": "job-4", "namespace": "ml"})).json()[
        "items"
    ]
    assert [j["uid"] for j in named] == [uids[4]]
    found = (await api.get("/api/v1/jobs", params={"text": "b-5"})).json()["items"]
    assert [j["name"] for j in found] == ["job-5"]
    assert len((await api.get("/api/v1/jobs", params={"text": "ml"})).json()["items"]) == 7
    assert (
        len((await api.get("/api/v1/jobs", params={"text": "%"})).json()["items"]) == 7
    )  # no wildcard
    assert (await api.get("/api/v1/jobs", params={"text": "job_"})).json()["items"] == []
    assert (await api.get("/api/v1/jobs", params={"cluster": "gpu-east"})).json()["items"] == []
    response = await api.get("/api/v1/jobs", params={"state": "Sleeping"})
    assert response.status_code == 422
    assert response.json()["details"]["causes"][0]["field"] == "state (query)"
    response = await api.get("/api/v1/jobs", params={"continue": "garbage!"})
    assert response.status_code == 422
    assert response.json()["message"] == "continue: invalid continue token"


async def test_cancel_is_idempotent_and_final(api: httpx.AsyncClient) -> None:
    job = (await submit(api, job_document())).json()
    first = await api.post(f"/api/v1/jobs/{job['uid']}/cancel")
    assert first.status_code == 200
    assert first.json()["state"] == "Cancelled"
    assert first.json()["timestamps"]["finishedAt"] is not None
    second = await api.post(f"/api/v1/jobs/{job['uid']}/cancel")
    assert second.status_code == 200
    assert second.json()["timestamps"] == first.json()["timestamps"]
    events = (await api.get(f"/api/v1/jobs/{job['uid']}/events")).json()["items"]
    assert [e["reason"] for e in events] == ["Cancelled", "Submitted"]


@pytest.mark.parametrize("path", ["/api/v1/jobs/{uid}", "/api/v1/jobs/{uid}/events"])
async def test_unknown_and_malformed_job_ids(api: httpx.AsyncClient, path: str) -> None:
    missing = await api.get(path.format(uid="00000000-0000-0000-0000-000000000000"))
    assert missing.status_code == 404
    malformed = await api.get(path.format(uid="not-a-uid"))
    assert malformed.status_code == 422
    assert malformed.json()["details"]["causes"][0]["field"] == "uid"


async def test_hyperjob_submission(api: httpx.AsyncClient) -> None:
    await create_queue(api, "llm")
    job = (await submit(api, example("hyperjob-llm-training.yaml"))).json()
    assert job["kind"] == "HyperJob"
    assert job["gang"]["subJobs"][0]["replicas"] == 2
    assert json.loads(json.dumps(job["splitPolicy"]))["unit"] == "subJob"


async def test_updated_since_lists_only_the_jobs_changed_since(api: httpx.AsyncClient) -> None:
    old = (await submit(api, job_document("old"))).json()
    new = (await submit(api, job_document("new"))).json()
    cursor = new["timestamps"]["updatedAt"]
    assert cursor > old["timestamps"]["updatedAt"]
    listed = (await api.get("/api/v1/jobs", params={"updatedSince": cursor})).json()["items"]
    assert [j["name"] for j in listed] == ["new"]
    cancelled = (await api.post(f"/api/v1/jobs/{old['uid']}/cancel")).json()
    assert cancelled["timestamps"]["updatedAt"] > cursor
    listed = (await api.get("/api/v1/jobs", params={"updatedSince": cursor})).json()["items"]
    assert {j["name"]: j["state"] for j in listed}["old"] == "Cancelled"
    naive = cursor.replace("Z", "").split("+")[0]  # a time without offset reads as UTC
    again = (await api.get("/api/v1/jobs", params={"updatedSince": naive})).json()["items"]
    assert [j["uid"] for j in again] == [j["uid"] for j in listed]
