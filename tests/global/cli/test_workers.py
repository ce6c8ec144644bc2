"""`vglobal server --workers 2` on Postgres: two processes share the REST and gRPC ports, each a
replica; exactly one schedules, and agents reach the cluster through either. On SQLite it is
refused with the reason."""

from __future__ import annotations

import asyncio
import re
import subprocess
import time
from pathlib import Path

import httpx

from core_agent.simulated.cluster import ClusterSpec, SimulatedCluster
from tests.agents import join
from tests.conftest import ADMIN_TOKEN
from tests.factories import REPLY_S, job_document
from tests.server_process import READY_WITHIN_S, VGLOBAL, ServerProcess

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
SPEC = ClusterSpec.model_validate({"nodeGroups": [{"count": 4, "gpusPerNode": 8}]})


HEALTHZ = 'vglobal_http_requests_total{method="GET",route="/healthz",status="200"}'


async def _scrape(server: ServerProcess) -> str:
    async with httpx.AsyncClient(timeout=REPLY_S, base_url=server.url, headers=ADMIN) as fresh:
        return (await fresh.get("/metrics")).text


def _sample(text: str, series: str) -> float:
    found = re.search(rf"^{re.escape(series)} ([0-9.e+]+)$", text, re.M)
    assert found is not None, f"{series} not in the scrape"
    return float(found.group(1))


def test_workers_need_postgres(tmp_path: Path) -> None:
    server = ServerProcess(f"sqlite+aiosqlite:///{tmp_path}/one.db", tmp_path)
    done = subprocess.run(
        [*VGLOBAL, "server", "--workers", "2"],
        env=server.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "workers > 1 needs Postgres" in done.stderr


async def test_two_workers_share_the_ports_and_one_schedules(
    postgres_server: ServerProcess,
) -> None:
    server = postgres_server
    server.env["VGLOBAL_WORKERS"] = "2"
    stop = asyncio.Event()
    tasks = []
    try:
        await asyncio.to_thread(server.start)
        async with httpx.AsyncClient(base_url=server.url, headers=ADMIN, timeout=10) as api:
            # Fresh connections land on one worker or the other; the workers share one
            # PROMETHEUS_MULTIPROC_DIR, so every scrape sums both: the replica leads, and a
            # counter never jumps back and forth between the workers' own counts.
            for calls in range(1, 7):
                async with httpx.AsyncClient(timeout=REPLY_S, base_url=server.url) as fresh:
                    assert (await fresh.get("/healthz")).status_code == 200
                scraped = await _scrape(server)
                assert _sample(scraped, "vglobal_scheduler_leader") == 1.0
                assert _sample(scraped, HEALTHZ) == calls

            for name in ("east", "west"):
                cluster = SimulatedCluster.from_spec(name, SPEC)
                target = server.grpc_target
                tasks.append(await join(api, name, cluster, target=target, stop=stop))
            uid = (await api.post("/api/v1/jobs", json=job_document("w", replicas=2))).json()["uid"]
            deadline = time.monotonic() + READY_WITHIN_S  # minutes: a loaded host
            while (await api.get(f"/api/v1/jobs/{uid}")).json()["state"] != "Running":
                assert time.monotonic() < deadline, "the job did not run"
                await asyncio.sleep(0.2)
            for _ in range(4):  # placed by the leading worker, seen through either
                scraped = await _scrape(server)
                assert _sample(scraped, "vglobal_jobs_placed_total") == 1.0
                assert _sample(scraped, 'vglobal_queue_wait_seconds_count{queue="default"}') == 1
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
