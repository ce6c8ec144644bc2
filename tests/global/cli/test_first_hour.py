"""What a new user types in the first hour (issue 37), against a real `vglobal server`: one
job shown and cancelled as a table, `-o` after the command, `--dry-run`, `--version`, the agent
command of a new cluster, bounded events, tokens, and an aligned `get -w`."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
import yaml

from tests.conftest import ADMIN_TOKEN
from tests.factories import REPLY_S, job_document, to_yaml
from tests.server_process import ServerProcess
from volcano_global.cli.apply import _WatchTable


def job_file(tmp_path: Path, name: str = "train") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(to_yaml(job_document(name)))
    return path


def test_one_job_is_a_table_row_and_a_second_cancel_says_so(
    server: ServerProcess, tmp_path: Path
) -> None:
    assert server.cli("submit", "-f", str(job_file(tmp_path))).returncode == 0
    shown = server.cli("get", "ml/train")
    assert shown.returncode == 0, shown.stderr
    header, row = shown.stdout.strip().splitlines()
    assert header.split()[:2] == ["NAMESPACE", "NAME"]
    assert row.split()[:2] == ["ml", "train"] and "Pending" in row

    first = server.cli("cancel", "ml/train")
    assert (first.returncode, first.stdout.strip()) == (0, "job ml/train cancelled")
    again = server.cli("cancel", "ml/train")
    assert again.returncode == 0
    assert again.stdout.startswith("job ml/train was already cancelled (cancelled by admin)")
    assert "Cancelled" in server.cli("get", "ml/train").stdout


def test_output_after_the_command_dry_run_and_version(
    server: ServerProcess, tmp_path: Path
) -> None:
    path = job_file(tmp_path)
    checked = server.cli("submit", "-f", str(path), "--dry-run")
    assert checked.returncode == 0, checked.stderr
    assert "dry run: not stored" in checked.stdout
    assert json.loads(server.cli("jobs", "-o", "json").stdout)["items"] == []

    server.cli("submit", "-f", str(path))
    as_yaml = yaml.safe_load(server.cli("get", "ml/train", "-o", "yaml").stdout)
    assert as_yaml["name"] == "train"
    assert json.loads(server.cli("get", "ml/train", "--output=json").stdout)["name"] == "train"
    version = server.cli("--version")
    assert version.returncode == 0 and version.stdout.startswith("vglobal 0.")


def test_clusters_add_prints_the_agent_command(server: ServerProcess) -> None:
    added = server.cli("clusters", "add", "gpu-east")
    assert added.returncode == 0, added.stderr
    token = next(w for w in added.stdout.split() if w.startswith("vg_"))
    # The port the server listens on for agents (the fixture's is not the default 8081, which
    # the command printed before whatever the server's was).
    assert (
        f"VGLOBAL_AGENT_TOKEN={token} vglobal agent --cluster gpu-east "
        f"--global {server.grpc_target} --source kubernetes"
    ) in added.stdout
    assert "VGLOBAL_AGENTS__ADDRESS" in added.stdout  # how to print the address agents dial


def test_clusters_add_prints_the_address_the_server_is_told(tmp_path: Path) -> None:
    server = ServerProcess(f"sqlite+aiosqlite:///{tmp_path}/a.db", tmp_path)
    server.env["VGLOBAL_AGENTS__ADDRESS"] = "agents.global.example.com:443"
    server.start()
    try:
        added = server.cli("clusters", "add", "gpu-west")
    finally:
        server.stop()
    assert added.returncode == 0, added.stderr
    assert "--global agents.global.example.com:443 --source kubernetes" in added.stdout
    assert "VGLOBAL_AGENTS__ADDRESS" not in added.stdout


def test_an_agent_address_without_a_port_is_refused() -> None:
    from pydantic import ValidationError

    from volcano_global.settings import Settings

    for wrong in ("agents.global.example.com", "http://agents:443", "fd00::1:443"):
        with pytest.raises(ValidationError, match="expected host:port"):
            Settings(agents={"address": wrong})
    assert Settings(agents={"address": "[fd00::1]:443"}).agents.address == "[fd00::1]:443"


def test_events_are_bounded(server: ServerProcess, tmp_path: Path) -> None:
    server.cli("submit", "-f", str(job_file(tmp_path)))
    server.cli("cancel", "ml/train")
    everything = server.cli("events", "ml/train")
    assert len(everything.stdout.strip().splitlines()) >= 3  # header, Submitted, ..., Cancelled
    newest = server.cli("events", "ml/train", "--limit", "1")
    assert newest.returncode == 0
    lines = newest.stdout.strip().splitlines()
    assert len(lines) == 2 and "Cancelled" in lines[1]
    assert "older events not shown" in newest.stderr


def test_tokens_create_list_revoke(server: ServerProcess) -> None:
    created = server.cli("tokens", "create", "grafana", "--role", "reader")
    assert created.returncode == 0, created.stderr
    secret = created.stdout.split("token (shown once): ")[1].strip()
    api = httpx.Client(
        timeout=REPLY_S, base_url=server.url, headers={"Authorization": f"Bearer {secret}"}
    )
    assert api.get("/api/v1/jobs").status_code == 200
    assert "grafana" in server.cli("tokens").stdout
    revoked = server.cli("tokens", "revoke", "grafana")
    assert revoked.returncode == 0 and "revoked" in revoked.stdout
    assert api.get("/api/v1/jobs").status_code == 401


def test_get_jobs_watch_is_aligned(server: ServerProcess, tmp_path: Path) -> None:
    server.cli("submit", "-f", str(job_file(tmp_path, "a-much-longer-job-name")))
    with server.watching("get", "jobs", "-w", "--interval", "0.2") as watched:
        header = watched.readline()
        first = watched.readline()
        server.cli("cancel", "ml/a-much-longer-job-name")
        changed = watched.readline()  # blocks until the watch prints the change
        column = header.index("STATE")
        assert first[column:].startswith("Pending")
        assert changed[column:].startswith("Cancelled")


def test_a_watch_prints_a_row_again_only_when_a_shown_cell_changed(capsys) -> None:  # type: ignore[no-untyped-def]
    table = _WatchTable([("NAME", lambda r: r["name"]), ("STATE", lambda r: r["state"])])
    table.print([("1", {"name": "a", "state": "Pending", "updatedAt": "t1"})], first=True)
    table.print([("1", {"name": "a", "state": "Pending", "updatedAt": "t2"})], first=False)
    table.print([("1", {"name": "a", "state": "Running", "updatedAt": "t3"})], first=False)
    assert capsys.readouterr().out.splitlines() == [
        "NAME   STATE",
        "a      Pending",
        "a      Running",
    ]


def test_a_name_is_taken_until_deleted_for_vglobal_and_kubectl_alike(
    server: ServerProcess, tmp_path: Path
) -> None:
    path = job_file(tmp_path)
    assert server.cli("submit", "-f", str(path)).returncode == 0
    server.cli("cancel", "ml/train")
    again = server.cli("submit", "-f", str(path))
    assert (again.returncode, again.stderr.strip()) == (
        1,
        "error: 409 Conflict: job ml/train already exists (Cancelled): delete it first "
        "(vglobal delete ml/train) or choose another name",
    )
    kube = httpx.Client(
        timeout=REPLY_S, base_url=server.url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
    )
    jobs = "/k8s/apis/batch.volcano.sh/v1alpha1/namespaces/ml/jobs"
    assert kube.post(jobs, json=job_document("train")).status_code == 409  # kubectl create

    deleted = server.cli("delete", "ml/train")
    assert (deleted.returncode, deleted.stdout.strip()) == (0, "job ml/train deleted (Cancelled)")
    assert server.cli("submit", "-f", str(path)).returncode == 0
    listed = json.loads(server.cli("jobs", "-o", "json").stdout)["items"]
    assert [j["state"] for j in listed] == ["Pending", "Cancelled"]  # the old one's history
