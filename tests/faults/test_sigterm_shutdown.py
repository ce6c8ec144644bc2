"""SIGTERM to a loaded server process on Postgres (jobs arriving, agents streaming, rounds
running, a kubectl watch open): it exits with code 0 within its shutdown budget (below the
30 s Kubernetes gives a pod), and every job it answered 201 for is there afterwards."""

from __future__ import annotations

import asyncio
import signal
import time
import uuid
from pathlib import Path

import httpx

from core_agent.simulated.cluster import ClusterSpec
from tests.conftest import ADMIN_TOKEN, create_postgres_database, drop_postgres_database
from tests.factories import eventually, job_document
from tests.faults.invariants import join_recording_agents
from tests.server_process import ServerProcess

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
BUDGET_S = 8.0
SPEC = ClusterSpec.model_validate(
    {
        "nodeGroups": [{"count": 8, "gpusPerNode": 8, "gpuModel": "H100"}],
        "topology": {"tiers": [{"name": "tor", "size": 4}]},
    }
)
WATCH = "/k8s/apis/batch.volcano.sh/v1alpha1/namespaces/ml/jobs?watch=true"


async def submit_until(api: httpx.AsyncClient, stop: asyncio.Event, accepted: list[str]) -> None:
    """Submit jobs back to back until `stop`, then on until the server stops answering."""
    i = 0
    while True:
        i += 1
        name = f"load-{uuid.uuid4().hex[:6]}-{i}"
        try:
            response = await api.post("/api/v1/jobs", json=job_document(name, replicas=1))
        except httpx.HTTPError:
            if stop.is_set():
                return
            continue
        if response.status_code == 201:
            accepted.append(response.json()["uid"])
        elif stop.is_set():
            return
        else:
            assert response.status_code == 503, response.text


async def test_sigterm_under_load_exits_in_time_with_code_0_losing_nothing(
    tmp_path: Path,
) -> None:
    name = f"sigterm_{uuid.uuid4().hex[:8]}"
    url = await create_postgres_database(name)
    server = ServerProcess(url, tmp_path, scheduling=True)
    server.env.update(
        {
            "VGLOBAL_SHUTDOWN_BUDGET_S": str(BUDGET_S),
            "VGLOBAL_AGENTS__HEARTBEAT_INTERVAL_S": "1",
            "VGLOBAL_LOG_LEVEL": "warning",
        }
    )
    stop_agents, terminating = asyncio.Event(), asyncio.Event()
    accepted: list[str] = []
    try:
        await asyncio.to_thread(server.start)
        async with httpx.AsyncClient(base_url=server.url, headers=ADMIN, timeout=30) as api:
            target = server.grpc_target
            clusters, agents = await join_recording_agents(
                api, target, SPEC, names=("east", "west"), time_scale=0.01, stop=stop_agents
            )
            submitters = [
                asyncio.create_task(submit_until(api, terminating, accepted)) for _ in range(4)
            ]
            async with api.stream("GET", WATCH) as watch:
                assert watch.status_code == 200
                # Rounds have placed jobs and the agents run some shares.
                await eventually(
                    lambda: sum(sum(c.binds.values()) for c in clusters.values()) >= 3, within=60
                )
                assert server.proc is not None
                terminating.set()
                began = time.monotonic()
                server.proc.send_signal(signal.SIGTERM)
                code = await asyncio.to_thread(server.proc.wait, 30)
                took = time.monotonic() - began
            await asyncio.gather(*submitters)
            stop_agents.set()
            await asyncio.gather(*agents)
        print(f"exited {code} after SIGTERM in {took:.2f} s, {len(accepted)} jobs accepted")
        assert code == 0, server.log.read_text()[-3000:]
        # The budget, and the interpreter's own exit on a loaded machine.
        assert took < BUDGET_S + 4.0, server.log.read_text()[-3000:]

        await asyncio.to_thread(server.start)  # the same database: every accepted job is there
        async with httpx.AsyncClient(base_url=server.url, headers=ADMIN, timeout=30) as api:
            for uid in accepted:
                assert (await api.get(f"/api/v1/jobs/{uid}")).status_code == 200, uid
    finally:
        await asyncio.to_thread(server.stop)
        await drop_postgres_database(name)
