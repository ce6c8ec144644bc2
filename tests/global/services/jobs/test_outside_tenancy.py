"""A waiting job that breaks its queue's tenancy rules (stored before the rules, or before an
admin narrowed the queue's grants) is cancelled when the server starts, naming the rule; a job
within them keeps waiting."""

from __future__ import annotations

import yaml

from tests.conftest import app_settings, running
from tests.factories import job_document, queue_document

YAML = {"Content-Type": "application/yaml"}


def queue(**annotations: str) -> str:
    return yaml.safe_dump(queue_document("ops", **annotations))


async def test_a_waiting_job_outside_its_queue_rules_is_cancelled_at_start(
    database_url: str,
) -> None:
    settings = app_settings(database_url)
    privileged = job_document("root", queue="ops")
    privileged["metadata"]["namespace"] = "ops"
    privileged["spec"]["tasks"][0]["template"]["spec"]["hostPID"] = True
    plain = job_document("plain", queue="ops")
    plain["metadata"]["namespace"] = "ops"
    for step in ("grant", "revoke", "restart"):
        async with running(settings) as (_, api):
            if step == "grant":
                granted = queue(**{"global.volcano.sh/pod-security": "privileged"})
                await api.post("/api/v1/apply", content=granted, headers=YAML)
                for document in (privileged, plain):
                    created = await api.post("/api/v1/jobs", json=document)
                    assert created.status_code == 201, created.text
            elif step == "revoke":
                await api.post("/api/v1/apply", content=queue(), headers=YAML)
                jobs = (await api.get("/api/v1/jobs")).json()["items"]
                assert {j["name"]: j["state"] for j in jobs} == {
                    "root": "Pending",
                    "plain": "Pending",
                }
            else:
                jobs = {j["name"]: j for j in (await api.get("/api/v1/jobs")).json()["items"]}
                assert jobs["plain"]["state"] == "Pending"
                assert jobs["root"]["state"] == "Cancelled"
                events = await api.get(f"/api/v1/jobs/{jobs['root']['uid']}/events")
                messages = [e["message"] for e in events.json()["items"]]
                assert any(
                    "cancelled by the tenancy rules of queue 'ops'" in m
                    and "spec.tasks[0].template.spec.hostPID" in m
                    and "(rule: pod security baseline)" in m
                    for m in messages
                ), messages
