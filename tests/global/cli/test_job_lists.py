"""`vglobal jobs` and `vglobal get jobs` as a user lists them: a cut list says so, `-n` and
`--state` in any case filter, a directory is applied as kubectl applies one."""

from __future__ import annotations

import json
from pathlib import Path

from tests.factories import job_document, to_yaml, volcano_queue
from tests.server_process import ServerProcess


def submit(server: ServerProcess, tmp_path: Path, name: str, namespace: str = "ml") -> None:
    document = job_document(name)
    document["metadata"]["namespace"] = namespace
    path = tmp_path / f"{name}.yaml"
    path.write_text(to_yaml(document))
    done = server.cli("submit", "-f", str(path))
    assert done.returncode == 0, done.stderr


def names(server: ServerProcess, *args: str) -> list[str]:
    listed = server.cli(*args, "-o", "json")
    assert listed.returncode == 0, listed.stderr
    return [j["name"] for j in json.loads(listed.stdout)["items"]]


def test_a_cut_list_says_so_and_all_follows_every_page(
    server: ServerProcess, tmp_path: Path
) -> None:
    for name in ("a", "b", "c"):
        submit(server, tmp_path, name)
    cut = server.cli("jobs", "--limit", "2")
    assert cut.returncode == 0, cut.stderr
    assert len(cut.stdout.strip().splitlines()) == 3  # the header and two jobs
    assert "more jobs" in cut.stderr and "--all" in cut.stderr
    every = server.cli("jobs", "--limit", "2", "--all")
    assert len(every.stdout.strip().splitlines()) == 4 and every.stderr == ""
    assert server.cli("jobs").stderr == ""  # the default 100: nothing cut


def test_namespace_and_state_in_any_case_filter_jobs(server: ServerProcess, tmp_path: Path) -> None:
    submit(server, tmp_path, "in-ml")
    submit(server, tmp_path, "in-default", namespace="default")
    assert names(server, "get", "jobs", "-n", "default") == ["in-default"]
    assert names(server, "get", "jobs", "-n", "ml") == ["in-ml"]
    assert sorted(names(server, "get", "jobs")) == ["in-default", "in-ml"]
    assert server.cli("cancel", "ml/in-ml").returncode == 0

    assert names(server, "jobs", "--state", "cancelled") == ["in-ml"]
    assert names(server, "jobs", "--state", "PENDING") == ["in-default"]
    unknown = server.cli("jobs", "--state", "runing")
    assert unknown.returncode == 1
    assert "unknown job state 'runing'" in unknown.stderr and "Running" in unknown.stderr


def test_the_cli_spells_every_state_as_the_server() -> None:
    from volcano_global.cli.resources import JOB_STATES
    from volcano_global.db.models import JobState

    assert JOB_STATES == tuple(JobState)


def test_apply_takes_a_directory_and_submit_the_filename_spelling(
    server: ServerProcess, tmp_path: Path
) -> None:
    folder = tmp_path / "manifests"
    (folder / "nested").mkdir(parents=True)
    (folder / "b-job.json").write_text(json.dumps(job_document("first", queue="llm")))
    (folder / "a-queue.yaml").write_text(to_yaml(volcano_queue("llm", weight=1)))
    (folder / "nested" / "c-job.yml").write_text(to_yaml(job_document("nested")))
    (folder / "README.md").write_text("not a document")
    applied = server.cli("apply", "-f", str(folder))
    assert applied.returncode == 0, applied.stderr
    assert applied.stdout.splitlines() == [
        "queue.scheduling.volcano.sh/llm created",
        "job.batch.volcano.sh/ml/first created",
    ]
    nested = server.cli("apply", "-f", str(folder / "nested"))  # not recursive: on its own
    assert nested.stdout.splitlines() == ["job.batch.volcano.sh/ml/nested created"]

    (tmp_path / "second.yaml").write_text(to_yaml(job_document("second")))
    submitted = server.cli("submit", "--filename", str(tmp_path / "second.yaml"))
    assert submitted.returncode == 0, submitted.stderr
    assert sorted(names(server, "jobs")) == ["first", "nested", "second"]
