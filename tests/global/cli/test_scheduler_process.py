"""`vglobal scheduler`: the scheduling loop alone in its own process, beside an API replica that
does not schedule (Postgres), its metrics on a port of their own; refused on SQLite with the
reason."""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path

import httpx

from tests.conftest import create_postgres_database, drop_postgres_database
from tests.factories import job_document
from tests.server_process import VGLOBAL, ServerProcess, free_port
from volcano_global.services.jobs.submission import NOT_YET_SCHEDULED


def test_a_separate_scheduler_needs_postgres(tmp_path: Path) -> None:
    server = ServerProcess(f"sqlite+aiosqlite:///{tmp_path}/one.db", tmp_path)
    done = subprocess.run(
        [*VGLOBAL, "scheduler"], env=server.env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0
    assert "needs Postgres" in done.stderr


def test_jobs_wait_until_the_scheduler_process_runs_then_are_placed(
    tmp_path: Path, fresh_database_name: str
) -> None:
    url = asyncio.run(create_postgres_database(fresh_database_name))
    server = ServerProcess(url, tmp_path, scheduling=False)
    scheduler: subprocess.Popen[bytes] | None = None
    try:
        server.start()
        api = server.admin_with_cluster("east")
        uid = api.post("/api/v1/jobs", json=job_document("solo", replicas=2)).json()["uid"]
        time.sleep(1.5)  # several of the API replica's periods: it does not schedule
        assert api.get(f"/api/v1/jobs/{uid}").json()["state"] == "Pending"

        log = (tmp_path / "scheduler.log").open("wb")
        metrics_port = free_port()
        scheduler = subprocess.Popen(
            [*VGLOBAL, "scheduler", "--interval-s", "0.2", "--metrics-port", str(metrics_port)],
            env=server.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while api.get(f"/api/v1/jobs/{uid}").json()["state"] != "Placed":
            assert scheduler.poll() is None, (tmp_path / "scheduler.log").read_text()
            assert time.monotonic() < deadline, "the scheduler process placed nothing"
            time.sleep(0.2)
        metrics = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).text
        assert "vglobal_scheduler_leader 1.0" in metrics
        assert "vglobal_jobs_placed_total 1.0" in metrics
        assert 'vglobal_scheduling_rounds_total{outcome="committed"}' in metrics
        scheduler.terminate()
        assert scheduler.wait(timeout=30) == 0  # SIGTERM: leadership released, clean exit
        assert (
            "scheduling (looking for waiting jobs every 0.20 s)"
            in (tmp_path / "scheduler.log").read_text()
        )
    finally:
        if scheduler is not None and scheduler.poll() is None:
            scheduler.kill()
        server.stop()
        asyncio.run(drop_postgres_database(fresh_database_name))


def test_a_quota_raised_through_an_api_replica_wakes_the_scheduler_process(
    tmp_path: Path, fresh_database_name: str
) -> None:
    """Its period is two minutes: only the API replica's commit (Postgres NOTIFY) can place
    the capped job within seconds."""
    url = asyncio.run(create_postgres_database(fresh_database_name))
    server = ServerProcess(url, tmp_path, scheduling=False)
    scheduler: subprocess.Popen[bytes] | None = None
    try:
        server.start()
        api = server.admin_with_cluster("east")
        made = api.post("/api/v1/queues", json={"name": "capped", "weight": 1, "gpuQuota": 8})
        assert made.status_code == 201, made.text
        document = job_document("capped", queue="capped", replicas=2)  # 16 GPUs
        uid = api.post("/api/v1/jobs", json=document).json()["uid"]
        log = (tmp_path / "scheduler.log").open("wb")
        scheduler = subprocess.Popen(
            [*VGLOBAL, "scheduler", "--interval-s", "120"],
            env=server.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )

        def until(state: str, why: str) -> None:
            deadline = time.monotonic() + 30
            while True:
                job = api.get(f"/api/v1/jobs/{uid}").json()
                if job["state"] == state and job["pendingReason"] != NOT_YET_SCHEDULED:
                    return
                assert scheduler.poll() is None, (tmp_path / "scheduler.log").read_text()
                assert time.monotonic() < deadline, why
                time.sleep(0.1)

        until("Pending", "no round considered the job")  # over its quota
        raised = api.patch("/api/v1/queues/capped", json={"gpuQuota": 16})
        assert raised.status_code == 200, raised.text
        until("Placed", "the quota change did not wake the scheduler process")
        scheduler.terminate()
        assert scheduler.wait(timeout=30) == 0
    finally:
        if scheduler is not None and scheduler.poll() is None:
            scheduler.kill()
        server.stop()
        asyncio.run(drop_postgres_database(fresh_database_name))
