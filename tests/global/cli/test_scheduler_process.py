"""`vglobal scheduler`: the scheduling loop alone in its own process, beside an API replica that
does not schedule (Postgres), its metrics on a port of their own; refused on SQLite with the
reason."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import create_postgres_database, drop_postgres_database
from tests.factories import job_document
from tests.server_process import READY_WITHIN_S, VGLOBAL, ServerProcess, free_port
from volcano_global.services.jobs.submission import NOT_YET_SCHEDULED

Scheduler = Callable[..., subprocess.Popen[bytes]]


def test_a_separate_scheduler_needs_postgres(tmp_path: Path) -> None:
    server = ServerProcess(f"sqlite+aiosqlite:///{tmp_path}/one.db", tmp_path)
    done = subprocess.run(
        [*VGLOBAL, "scheduler"], env=server.env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0
    assert "needs Postgres" in done.stderr


@pytest.fixture
def replica(tmp_path: Path, fresh_database_name: str) -> Iterator[ServerProcess]:
    """An API replica that does not schedule, on a fresh Postgres database."""
    url = asyncio.run(create_postgres_database(fresh_database_name))
    server = ServerProcess(url, tmp_path, scheduling=False)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        asyncio.run(drop_postgres_database(fresh_database_name))


@pytest.fixture
def scheduler(replica: ServerProcess, tmp_path: Path) -> Iterator[Scheduler]:
    """Starts `vglobal scheduler ARGS` beside the replica (its log: scheduler.log); killed
    after the test if still running."""
    started: list[subprocess.Popen[bytes]] = []

    def start(*args: str) -> subprocess.Popen[bytes]:
        log = (tmp_path / "scheduler.log").open("wb")
        started.append(
            subprocess.Popen(
                [*VGLOBAL, "scheduler", *args],
                env=replica.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
        return started[-1]

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()


def test_jobs_wait_until_the_scheduler_process_runs_then_are_placed(
    replica: ServerProcess, scheduler: Scheduler, tmp_path: Path
) -> None:
    api = replica.admin_with_cluster("east")
    uid = api.post("/api/v1/jobs", json=job_document("solo", replicas=2)).json()["uid"]
    time.sleep(1.5)  # several of the API replica's periods: it does not schedule
    assert api.get(f"/api/v1/jobs/{uid}").json()["state"] == "Pending"

    metrics_port = free_port()
    process = scheduler("--interval-s", "0.2", "--metrics-port", str(metrics_port))
    deadline = time.monotonic() + READY_WITHIN_S  # a process start under load
    while api.get(f"/api/v1/jobs/{uid}").json()["state"] != "Placed":
        assert process.poll() is None, (tmp_path / "scheduler.log").read_text()
        assert time.monotonic() < deadline, "the scheduler process placed nothing"
        time.sleep(0.2)
    metrics = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).text
    assert "vglobal_scheduler_leader 1.0" in metrics
    assert "vglobal_jobs_placed_total 1.0" in metrics
    assert 'vglobal_scheduling_rounds_total{outcome="committed"}' in metrics
    process.terminate()
    assert process.wait(timeout=30) == 0  # SIGTERM: leadership released, clean exit
    assert (
        "scheduling (looking for waiting jobs every 0.20 s)"
        in (tmp_path / "scheduler.log").read_text()
    )


def test_a_quota_raised_through_an_api_replica_wakes_the_scheduler_process(
    replica: ServerProcess, scheduler: Scheduler, tmp_path: Path
) -> None:
    """Its period is an hour, longer than the test may wait (`READY_WITHIN_S`): only the API
    replica's commit (Postgres NOTIFY) can place the capped job."""
    api = replica.admin_with_cluster("east")
    made = api.post("/api/v1/queues", json={"name": "capped", "weight": 1, "gpuQuota": 8})
    assert made.status_code == 201, made.text
    document = job_document("capped", queue="capped", replicas=2)  # 16 GPUs
    uid = api.post("/api/v1/jobs", json=document).json()["uid"]
    process = scheduler("--interval-s", "3600")

    def until(state: str, why: str) -> None:
        deadline = time.monotonic() + READY_WITHIN_S  # a process start under load
        while True:
            job = api.get(f"/api/v1/jobs/{uid}").json()
            if job["state"] == state and job["pendingReason"] != NOT_YET_SCHEDULED:
                return
            assert process.poll() is None, (tmp_path / "scheduler.log").read_text()
            assert time.monotonic() < deadline, why
            time.sleep(0.1)

    until("Pending", "no round considered the job")  # over its quota
    raised = api.patch("/api/v1/queues/capped", json={"gpuQuota": 16})
    assert raised.status_code == 200, raised.text
    until("Placed", "the quota change did not wake the scheduler process")
    process.terminate()
    assert process.wait(timeout=30) == 0
