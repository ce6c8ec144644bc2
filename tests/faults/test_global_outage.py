"""The Global down (SIGKILL) for longer than the NotReady timeout while jobs run in its
clusters: when it comes back, the agents reconnect and nothing is requeued - the clusters were
never silent, the Global was absent. Every job runs once, under its first placement."""

from __future__ import annotations

import asyncio
import time

import httpx

from core_agent.simulated.cluster import ClusterSpec
from tests.conftest import ADMIN_TOKEN
from tests.factories import job_document
from tests.faults.invariants import check_invariants, join_recording_agents, write_report
from tests.server_process import READY_WITHIN_S, ServerProcess

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
SPEC = ClusterSpec.model_validate(
    {
        "nodeGroups": [{"count": 4, "gpusPerNode": 8, "gpuModel": "H100"}],
        "topology": {"tiers": [{"name": "tor", "size": 2}]},
    }
)
TIMEOUT_S = 2.0  # the NotReady timeout
OUTAGE_S = 3 * TIMEOUT_S


async def test_global_down_longer_than_the_not_ready_timeout(
    postgres_server: ServerProcess,
) -> None:
    server = postgres_server
    server.env.update(
        {
            "VGLOBAL_AGENTS__HEARTBEAT_INTERVAL_S": "1",
            "VGLOBAL_AGENTS__HEARTBEAT_TIMEOUT_S": str(TIMEOUT_S),
            "VGLOBAL_LOG_LEVEL": "warning",
        }
    )
    stop = asyncio.Event()
    tasks: list[asyncio.Task[None]] = []
    try:
        await asyncio.to_thread(server.start)
        api = httpx.AsyncClient(base_url=server.url, headers=ADMIN, timeout=30)
        clusters, agents = await join_recording_agents(
            api,
            server.grpc_target,
            SPEC,
            names=("east", "west"),
            time_scale=0.1,  # each job runs 25 s: across the outage
            stop=stop,
        )
        tasks.extend(agents)
        accepted = {}
        for i in range(4):  # two 16-GPU jobs per cluster
            doc = job_document(f"job-{i}", replicas=2, runningEstimate="250s")
            response = await api.post("/api/v1/jobs", json=doc)
            assert response.status_code == 201, response.text
            accepted[f"ml/job-{i}"] = response.json()["uid"]

        async def states() -> list[str]:
            items = (await api.get("/api/v1/jobs", params={"limit": 10})).json()["items"]
            return sorted(j["state"] for j in items)

        deadline = time.monotonic() + READY_WITHIN_S  # minutes: a loaded host
        while await states() != ["Running"] * 4:
            assert time.monotonic() < deadline, await states()
            await asyncio.sleep(0.2)

        killed = time.monotonic()
        await asyncio.to_thread(server.kill)
        await asyncio.sleep(OUTAGE_S)
        await asyncio.to_thread(server.start)
        outage = time.monotonic() - killed

        deadline = time.monotonic() + 60
        while (left := await states()) != ["Succeeded"] * 4:
            assert time.monotonic() < deadline, left
            await asyncio.sleep(0.5)
        await asyncio.sleep(1.0)  # the last acknowledgements
        checked = await check_invariants(
            server.env["VGLOBAL_DATABASE_URL"], clusters, accepted=accepted
        )
        for name in clusters:
            events = (await api.get(f"/api/v1/clusters/{name}/events")).json()["items"]
            assert "NotReady" not in [e["reason"] for e in events], events
            checked.add("clusters never NotReady")
        write_report(
            "global-outage",
            {
                "outage seconds (SIGKILL to ready again)": round(outage, 1),
                "NotReady timeout seconds": TIMEOUT_S,
                "invariants checked": dict(checked.counts),
            },
        )
        await api.aclose()
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
