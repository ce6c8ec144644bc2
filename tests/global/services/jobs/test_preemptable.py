"""Volcano's `volcano.sh/preemptable` annotation is read once: at submission, and again when
`kubectl annotate` changes it on a live job; the rounds read the job's flag."""

from __future__ import annotations

import json
import uuid

import httpx
from fastapi import FastAPI

from tests.factories import job_document, submit
from volcano_global.db.engine import transaction
from volcano_global.db.models import Job

JOBS = "/k8s/apis/batch.volcano.sh/v1alpha1/namespaces/ml/jobs"
MERGE = {"Content-Type": "application/merge-patch+json"}


async def _flag(app: FastAPI, uid: str) -> bool:
    async with transaction(app.state.sessions) as session:
        job = await session.get(Job, uuid.UUID(uid))
        assert job is not None
        return job.preemptable


async def test_the_annotation_sets_the_flag_and_an_annotate_changes_it(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    pinned = job_document("pinned")
    pinned["metadata"]["annotations"] = {"volcano.sh/preemptable": "false"}
    ids = {
        d["metadata"]["name"]: (await submit(api, d)).json()["uid"]
        for d in (pinned, job_document("free"))
    }
    assert [await _flag(app, ids[n]) for n in ("pinned", "free")] == [False, True]

    def annotate(value: str | None) -> str:
        return json.dumps({"metadata": {"annotations": {"volcano.sh/preemptable": value}}})

    freed = await api.patch(f"{JOBS}/pinned", content=annotate(None), headers=MERGE)
    assert freed.status_code == 200, freed.text
    assert await _flag(app, ids["pinned"]) is True
    held = await api.patch(f"{JOBS}/free", content=annotate("false"), headers=MERGE)
    assert held.status_code == 200, held.text
    assert held.json()["metadata"]["annotations"] == {"volcano.sh/preemptable": "false"}
    assert await _flag(app, ids["free"]) is False
    # A multi-cluster annotation still changes what the job runs: refused, the flag unchanged.
    split = json.dumps({"metadata": {"annotations": {"global.volcano.sh/split": "auto"}}})
    refused = await api.patch(f"{JOBS}/free", content=split, headers=MERGE)
    assert refused.status_code == 422
    assert await _flag(app, ids["free"]) is False
