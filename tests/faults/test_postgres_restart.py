"""Postgres restarted (fast shutdown: every connection dropped) while a Global process takes
submissions and reads, runs its scheduling loop and streams with two agents whose inventory
keeps changing. During the outage requests get 503 (retry) and nothing else; afterwards the
Global works again without a restart of its own, every accepted job runs once, and the
inventory it holds equals the clusters'."""

from __future__ import annotations

import asyncio
import random
import subprocess
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from core_agent.simulated.cluster import ClusterSpec
from tests.conftest import ADMIN_TOKEN, create_postgres_database, drop_postgres_database
from tests.factories import job_document
from tests.faults.invariants import (
    RecordingCluster,
    check_invariants,
    join_recording_agents,
    write_report,
)
from tests.server_process import ServerProcess

pytestmark = pytest.mark.serial  # every other test's connections would drop with it

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
SPEC = ClusterSpec.model_validate(
    {
        "nodeGroups": [{"count": 16, "gpusPerNode": 8, "gpuModel": "H100"}],
        "topology": {"tiers": [{"name": "tor", "size": 4}]},
    }
)


def restart_postgres() -> float:
    """Restart the local cluster the tests use; seconds it took."""
    version = sorted(p.name for p in Path("/etc/postgresql").iterdir())[-1]
    started = time.monotonic()
    subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "restart", "-m", "fast"],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return time.monotonic() - started


async def churn(clusters: dict[str, RecordingCluster], stop: asyncio.Event) -> None:
    """Nodes go NotReady and come back all the time (deltas flow through the outage)."""
    rng = random.Random(3)
    while not stop.is_set():
        for cluster in clusters.values():
            node = rng.choice(sorted(cluster.nodes))
            cluster.update_node(node, ready=not cluster.nodes[node].ready)
        await asyncio.sleep(0.1)
    for cluster in clusters.values():
        for name, node in cluster.nodes.items():
            if not node.ready:
                cluster.update_node(name, ready=True)


async def test_postgres_restart_under_load(tmp_path: Path, fresh_database_name: str) -> None:
    url = await create_postgres_database(fresh_database_name)
    server = ServerProcess(url, tmp_path, scheduling=True)
    server.env.update({"VGLOBAL_AGENTS__HEARTBEAT_INTERVAL_S": "1", "VGLOBAL_LOG_LEVEL": "warning"})
    stop, churning = asyncio.Event(), asyncio.Event()
    tasks: list[asyncio.Task[None]] = []
    answers: Counter[str] = Counter()
    accepted: dict[str, str] = {}
    try:
        await asyncio.to_thread(server.start)
        api = httpx.AsyncClient(base_url=server.url, headers=ADMIN, timeout=30)
        clusters, agents = await join_recording_agents(
            api,
            server.grpc_target,
            SPEC,
            names=("east", "west"),
            time_scale=0.05,
            stop=stop,
        )
        tasks.extend(agents)
        tasks.append(asyncio.create_task(churn(clusters, churning)))

        async def submit(i: int) -> None:
            doc = job_document(f"job-{i:03d}", replicas=2, runningEstimate="10s")
            try:
                response = await api.post("/api/v1/jobs", json=doc)
            except httpx.HTTPError as exc:
                answers[type(exc).__name__] += 1
                return
            answers[str(response.status_code)] += 1
            if response.status_code == 201:
                accepted[f"ml/job-{i:03d}"] = response.json()["uid"]
            else:
                assert response.status_code == 503, response.text
                assert response.json()["message"] == "database busy or unreachable; retry"

        async def reads() -> None:
            response = await api.get("/api/v1/jobs", params={"limit": 20})
            answers[f"read {response.status_code}"] += 1
            assert response.status_code in (200, 503), response.text

        restart = None
        began = time.monotonic()
        for i in range(150):  # 10 submissions and 10 reads a second for 15 s
            if i == 40:
                restart = asyncio.create_task(asyncio.to_thread(restart_postgres))
            await asyncio.gather(submit(i), reads(), asyncio.sleep(0.1))
        assert restart is not None
        outage = await restart
        assert answers["503"] > 0, f"the restart was not noticed: {answers}"
        churning.set()

        async def all_done() -> list[str]:
            response = await api.get("/api/v1/jobs", params={"limit": 500})
            if response.status_code != 200:
                return ["(not answering)"]
            items = response.json()["items"]
            return [f"{j['name']} {j['state']}" for j in items if j["state"] != "Succeeded"]

        deadline = time.monotonic() + 60
        while left := await all_done():
            assert time.monotonic() < deadline, f"not finished after the restart: {left}"
            await asyncio.sleep(0.5)
        assert (await api.get("/readyz")).status_code == 200
        await asyncio.sleep(1.0)  # the last deltas and acknowledgements
        for name, cluster in clusters.items():
            body = (await api.get(f"/api/v1/clusters/{name}")).json()
            assert body["state"] == "Ready"
            assert body["nodes"] == {
                "total": 16,
                "ready": sum(n.ready for n in cluster.nodes.values()),
            }
        checked = await check_invariants(url, clusters, accepted=accepted)
        log = server.log.read_text()
        assert "Traceback" not in log, log[-3000:]
        write_report(
            "postgres-restart",
            {
                "postgres restarts": 1,
                "restart seconds": round(outage, 2),
                "answers": dict(answers),
                "seconds": round(time.monotonic() - began, 1),
                "invariants checked": dict(checked.counts),
            },
        )
        await api.aclose()
    finally:
        stop.set()
        churning.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        server.stop()
        await drop_postgres_database(fresh_database_name)
