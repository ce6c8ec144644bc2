"""The real `vglobal server` process over real sockets: a kill -9 and restart on the same
database keeps everything, and the CLI talks to it with one clear line per error."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import httpx
import yaml

from tests.conftest import ADMIN_TOKEN
from tests.factories import REPLY_S, example, inventory, job_document, to_yaml
from tests.server_process import VGLOBAL, ServerProcess, free_port


def test_kill_and_restart_keeps_everything(server: ServerProcess) -> None:
    api = httpx.Client(
        timeout=REPLY_S, base_url=server.url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
    )
    token = api.post(
        "/api/v1/clusters", json={"name": "gpu-east", "labels": {"region": "r1"}}
    ).json()["agentToken"]
    api.post("/api/v1/clusters", json={"name": "gpu-west"})
    assert (
        api.put(
            "/api/v1/clusters/gpu-east/inventory",
            json=inventory("gpu-east"),
            headers={"Authorization": f"Bearer {token}"},
        ).status_code
        == 200
    )
    api.post(
        "/api/v1/links", json={"clusterA": "gpu-east", "clusterB": "gpu-west", "capacityGbps": 200}
    )
    api.post("/api/v1/queues", json={"name": "llm", "weight": 3, "gpuQuota": 512})
    job = api.post(
        "/api/v1/jobs",
        content=example("llm-pretrain-64x8.yaml"),
        headers={"Content-Type": "application/yaml"},
    ).json()
    before = {
        path: api.get(path).json()
        for path in (
            "/api/v1/clusters",
            "/api/v1/links",
            "/api/v1/queues",
            "/api/v1/jobs",
            f"/api/v1/jobs/{job['uid']}",
            f"/api/v1/jobs/{job['uid']}/events",
        )
    }

    server.kill()
    server.start()

    after = {path: api.get(path).json() for path in before}
    assert after == before
    # The agent token survived too, and the job's name is still taken.
    assert (
        api.get(
            "/api/v1/clusters/gpu-east", headers={"Authorization": f"Bearer {token}"}
        ).status_code
        == 200
    )
    assert (
        api.post(
            "/api/v1/jobs",
            content=example("llm-pretrain-64x8.yaml"),
            headers={"Content-Type": "application/yaml"},
        ).status_code
        == 409
    )
    log = server.log.read_text()
    assert f"REST API on http://127.0.0.1:{server.port}/api/v1" in log


def test_cli_round_trip(server: ServerProcess, tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(to_yaml(job_document("train")))
    submitted = server.cli("-o", "json", "submit", "-f", str(path))
    assert submitted.returncode == 0, submitted.stderr
    uid = json.loads(submitted.stdout)["items"][0]["uid"]

    listed = server.cli("jobs")
    assert listed.returncode == 0
    assert "train" in listed.stdout
    assert "Pending" in listed.stdout
    shown = json.loads(server.cli("-o", "json", "get", "ml/train").stdout)
    assert shown["uid"] == uid
    assert shown["gang"]["totalGpus"] == 16
    assert "kind: Job" in server.cli("-o", "yaml", "get", uid).stdout
    cancelled = json.loads(server.cli("-o", "json", "cancel", "train").stdout)
    assert cancelled["state"] == "Cancelled"
    assert "Cancelled" in server.cli("events", "ml/train").stdout

    added = server.cli("clusters", "add", "gpu-east", "-l", "region=us-east")
    assert added.returncode == 0
    assert "vg_" in added.stdout
    assert "gpu-east" in server.cli("clusters").stdout
    server.cli("clusters", "add", "gpu-west")
    assert server.cli("links", "add", "gpu-east", "gpu-west", "400").returncode == 0
    assert "400" in server.cli("links").stdout
    assert server.cli("queues", "add", "llm", "--weight", "4").returncode == 0
    assert "llm" in server.cli("queues").stdout


def test_cli_errors_are_one_line_and_non_zero(server: ServerProcess, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    doc = job_document()
    doc["spec"]["tasks"][0]["replicas"] = -1
    bad.write_text(to_yaml(doc))
    result = server.cli("submit", "-f", str(bad))
    assert result.returncode == 1
    assert (
        result.stderr.strip()
        == "error: 422 Unprocessable Entity: spec.tasks[0].replicas: must be >= 0"
    )

    result = server.cli("submit", "-f", str(tmp_path / "missing.yaml"))
    assert result.returncode == 1
    assert result.stderr.strip().endswith("missing.yaml: No such file or directory")

    result = server.cli("get", "no-such-job")
    assert (result.returncode, result.stderr.strip()) == (1, "error: no job named 'no-such-job'")

    result = server.cli("--token", "vg_wrong", "jobs")
    assert result.returncode == 1
    assert result.stderr.startswith("error: 401 Unauthorized: invalid or revoked token (give ")
    assert "VGLOBAL_TOKEN" in result.stderr  # where a token goes

    result = server.cli("--server", f"http://127.0.0.1:{free_port()}", "jobs")
    assert result.returncode == 1
    assert result.stderr.startswith("error: cannot reach http://127.0.0.1:")
    assert "no Global listening there: `vglobal server` starts one" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_cli_reads_a_config_file(server: ServerProcess, tmp_path: Path) -> None:
    config = tmp_path / "vglobal.yaml"
    config.write_text(f"server: {server.url}\ntoken: {ADMIN_TOKEN}\n")
    env = {k: v for k, v in server.env.items() if k not in ("VGLOBAL_SERVER", "VGLOBAL_TOKEN")}
    result = subprocess.run(
        [*VGLOBAL, "--config", str(config), "queues"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0
    assert "default" in result.stdout


def test_plan_prints_the_document_and_checks_it_with_the_server(server: ServerProcess) -> None:
    api = server.admin_with_cluster()
    result = server.cli(
        "plan",
        "llama",
        "--tp",
        "8",
        "--pp",
        "2",
        "--dp",
        "2",
        "--params",
        "7e9",
        "--step-time",
        "2",
        "--check",
    )
    assert result.returncode == 0, result.stderr
    document = yaml.safe_load(result.stdout)  # stdout is the document alone
    assert document["spec"]["tasks"][0]["replicas"] == 4
    assert "2 pods" in result.stderr
    assert "560.0 Gbps" in result.stderr  # 8 x 7e9 x 2 / 0.2 s
    assert "It could start now: 4 pods in gpu-east" in result.stderr
    assert api.get("/api/v1/jobs").json()["items"] == []  # a check stores nothing
    bad = server.cli("plan", "x", "--tp", "16", "--dp", "2")
    assert bad.returncode == 1
    assert "tensorParallel (16) must divide gpusPerPod (8)" in bad.stderr


def test_the_servers_start_says_its_migration_in_one_line(server: ServerProcess) -> None:
    # alembic's own lines (about 100 on an empty database) only at DEBUG.
    started = server.log.read_text()
    assert started.count("database schema migrated from an empty database to ") == 1, started
    assert " INFO alembic" not in started
