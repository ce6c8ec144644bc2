"""`vglobal apply -f` of a multi-document file and `vglobal get jobs|queues -w` against a real
`vglobal server` process (SQLite and Postgres)."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.factories import job_document, priority_class, volcano_queue
from tests.server_process import ServerProcess

QUEUE = volcano_queue("llm", weight=1)
PRIORITY = priority_class("high", 1000)


def file_of(tmp_path: Path, *documents: object) -> Path:
    path = tmp_path / "all.yaml"
    path.write_text(yaml.safe_dump_all(documents, sort_keys=False))
    return path


def test_apply_is_idempotent_and_reports_each_document(
    server: ServerProcess, tmp_path: Path
) -> None:
    bad = job_document("broken", replicas=2)
    bad["spec"]["policies"] = [{"events": "PodFailed", "action": "RestartJob"}]
    uses_both = job_document("first", queue="llm")
    uses_both["spec"]["priorityClassName"] = "high"
    path = file_of(
        tmp_path,
        QUEUE,
        PRIORITY,
        uses_both,
        bad,
        job_document("second", queue="default", replicas=1),
    )
    first = server.cli("apply", "-f", str(path))
    assert first.returncode == 1, first.stderr
    assert first.stdout.splitlines() == [
        "queue.scheduling.volcano.sh/llm created",
        "priorityclass.scheduling.k8s.io/high created",
        "job.batch.volcano.sh/ml/first created",
        "job.batch.volcano.sh/ml/second created",
    ]
    assert "spec.policies[0].events: must be a list of events" in first.stderr

    again = server.cli("apply", "-f", str(path))
    assert again.stdout.splitlines() == [
        "queue.scheduling.volcano.sh/llm unchanged",
        "priorityclass.scheduling.k8s.io/high unchanged",
        "job.batch.volcano.sh/ml/first unchanged",
        "job.batch.volcano.sh/ml/second unchanged",
    ]
    api = server.admin()
    names = sorted(j["name"] for j in api.get("/api/v1/jobs").json()["items"])
    assert names == ["first", "second"]  # nothing created twice

    changed = file_of(tmp_path, job_document("first", queue="default", replicas=4))
    refused = server.cli("apply", "-f", str(changed))
    assert refused.returncode == 1
    assert "exists (state Pending) with a different document" in refused.stderr


def test_get_jobs_watch_follows_a_change_until_interrupted(
    server: ServerProcess, tmp_path: Path
) -> None:
    server.cli("apply", "-f", str(file_of(tmp_path, job_document("one", queue="default"))))
    with server.watching("get", "jobs", "-w", "--interval", "0.2") as watched:
        assert watched.readline().startswith("NAMESPACE")
        assert "one" in watched.readline()
        api = server.admin()
        uid = api.get("/api/v1/jobs", params={"name": "one"}).json()["items"][0]["uid"]
        assert api.post(f"/api/v1/jobs/{uid}/cancel").status_code == 200
        line = watched.readline()  # blocks until the watch prints the change
        assert "one" in line and "Cancelled" in line


def test_get_queues_watch_sees_a_new_queue_and_a_deleted_one(server: ServerProcess) -> None:
    with server.watching("get", "queues", "-w", "--interval", "0.2") as watched:
        assert watched.readline().startswith("NAME")
        assert watched.readline().startswith("default")
        api = server.admin()
        assert api.post("/api/v1/queues", json={"name": "llm", "weight": 2}).status_code == 201
        assert watched.readline().startswith("llm")
        assert api.delete("/api/v1/queues/llm").status_code == 204
        assert watched.readline().rstrip().endswith("(deleted)")
