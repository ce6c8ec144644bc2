"""Server CPU per REST request, measured in-process (the app and an ASGI client in one process,
no sockets, no agents, no scheduling loop): what one job submission, one page of 20 jobs and a
health check cost the server itself. The load benchmark measures the whole system; this one
tells which requests are expensive and whether a change made them cheaper.

    .venv/bin/python bench/request_cost_bench.py --database-url postgresql+asyncpg://postgres@127.0.0.1/DB
    .venv/bin/python bench/request_cost_bench.py          # a fresh SQLite file

The process's garbage collector is tuned as `vglobal server` tunes it once started (without it, one
full collection over the ~200,000 objects startup built, ~110 ms, lands in a row's window or not
depending on allocation history, and moves that row by ~0.4 ms per request).

Prints process CPU milliseconds per request (includes the in-process client's share, ~0.3 ms:
compare with healthz), per job from placed to done ("job lifecycle": dispatch and status
reports, the agent in a child process), per detail of a job that ran (its placement shown), and
per agent inventory delta of 50 node changes on a 5,000-node cluster."""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import httpx
from fastapi import FastAPI
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from load_requests import job  # noqa: E402

from core_agent.inventory import delta_of_changes  # noqa: E402
from core_agent.simulated.cluster import ClusterSpec, SimulatedCluster  # noqa: E402
from volcano_global.app import create_app  # noqa: E402
from volcano_global.cli.gc_tuning import tune_gc  # noqa: E402
from volcano_global.db.engine import transaction  # noqa: E402
from volcano_global.db.models import Job, JobState  # noqa: E402
from volcano_global.grpc.convert import delta_from, snapshot_from  # noqa: E402
from volcano_global.services.inventory.clusters import lock_cluster  # noqa: E402
from volcano_global.services.inventory.deltas import apply_delta  # noqa: E402
from volcano_global.services.inventory.snapshots import replace_inventory  # noqa: E402
from volcano_global.settings import Settings  # noqa: E402

TOKEN = "vg_bench_request_cost_0123456789"
ACTIVE = (JobState.PLACED, JobState.DISPATCHED, JobState.RUNNING)
TOGETHER = 20


async def measure(database_url: str, requests: int) -> dict[str, float]:
    settings = Settings(
        database_url=database_url,
        admin_token=TOKEN,
        grpc_port=0,
        log_level="warning",
        scheduling={"enabled": False},
    )
    app = create_app(settings)
    costs: dict[str, float] = {}
    async with app.router.lifespan_context(app):
        tune_gc()  # as `vglobal server` does once started: full collections skip startup's objects
        transport = httpx.ASGITransport(app=app)
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with httpx.AsyncClient(
            transport=transport, base_url="http://t", headers=headers
        ) as api:
            base = time.time_ns() % 10**9 * 1000
            uids = []
            for i in range(50):  # warm up, and 50 jobs for the pages
                answer = await api.post("/api/v1/jobs", json=job(base + i))
                assert answer.status_code == 201
                uids.append(answer.json()["uid"])
            calls = {
                "submit": lambda i: api.post("/api/v1/jobs", json=job(base + 100 + i)),
                "list 20 jobs": lambda i: api.get("/api/v1/jobs", params={"limit": 20}),
                "get 1 job": lambda i: api.get(f"/api/v1/jobs/{uids[i % len(uids)]}"),
                "healthz": lambda i: api.get("/healthz"),
            }
            for kind, call in calls.items():
                started = time.process_time()
                for i in range(requests):
                    response = await call(i)
                    assert response.status_code < 300, response.text
                costs[kind] = (time.process_time() - started) / requests * 1000
            # Submissions arriving together (as under load) are written in shared transactions.
            started = time.process_time()
            for first in range(0, requests, TOGETHER):
                answers = await asyncio.gather(
                    *(
                        api.post("/api/v1/jobs", json=job(base + 10**6 + i))
                        for i in range(first, first + TOGETHER)
                    )
                )
                assert all(a.status_code == 201 for a in answers)
            costs[f"submit, {TOGETHER} at once"] = (
                (time.process_time() - started) / (requests // TOGETHER * TOGETHER) * 1000
            )
            assert (await api.post("/api/v1/clusters", json={"name": "cost"})).status_code == 201
            costs["job lifecycle"] = await lifecycle_cost(app, api)
            # The lifecycle's jobs have run: their details show a placement and its shares.
            async with transaction(app.state.sessions) as session:
                ran = list(
                    (
                        await session.execute(
                            select(Job.id).where(Job.state == JobState.SUCCEEDED).limit(50)
                        )
                    ).scalars()
                )
            started = time.process_time()
            for i in range(requests):
                response = await api.get(f"/api/v1/jobs/{ran[i % len(ran)]}")
                assert response.status_code == 200 and response.json()["placement"]
            costs["get 1 job that ran"] = (time.process_time() - started) / requests * 1000
        costs["inventory delta"] = await delta_cost(app.state.sessions, requests)
    return costs


async def lifecycle_cost(app: FastAPI, api: httpx.AsyncClient, idle_s: float = 3.0) -> float:
    """What a job costs the server from placed to done, beyond its submission and placement:
    its assignment out of the outbox onto the agent's stream, the agent's Accepted, Running and
    Succeeded reports and their acknowledgements (a share that finds no room reports Failed
    and its job waits again). Every job the other rows left pending is placed in one scheduling
    pass (on a cluster of 200 nodes whose agent runs in a child process; simulated jobs without
    a running estimate finish at once) and waited for; the server's CPU over that time, less
    what it uses idle with the agent connected, per job placed."""
    token = (await api.post("/api/v1/clusters", json={"name": "lifecycle"})).json()["agentToken"]
    agent = await asyncio.create_subprocess_exec(
        sys.executable,
        str(REPO / "bench" / "load_bench.py"),
        "agents",
        f"127.0.0.1:{app.state.grpc_port}",
        json.dumps({"lifecycle": token}),
        "200",  # nodes: 1,600 GPUs for the one-GPU jobs
        "600",  # seconds
        "0",  # node changes a second (the agent still makes ten: in the idle baseline too)
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert agent.stdout is not None
        assert (await agent.stdout.readline()).strip() == b"synced"
        # The baseline polls as the measured part does: the polling is not counted either.
        started_cpu, started = time.process_time(), time.monotonic()
        while time.monotonic() - started < idle_s:
            await _poll(app.state.sessions)
        idle = (time.process_time() - started_cpu) / (time.monotonic() - started)
        jobs = 0
        while report := await app.state.scheduler.run_once():
            jobs += len(report.result.placed)
            if not report.result.placed:
                break
        assert jobs, "no job was placed"
        started_cpu, started = time.process_time(), time.monotonic()
        while active := await _poll(app.state.sessions):
            assert time.monotonic() - started < 120, f"{active} jobs still active after 120 s"
        busy = time.process_time() - started_cpu - idle * (time.monotonic() - started)
        return busy / jobs * 1000
    finally:
        agent.terminate()
        await agent.wait()


async def _poll(sessions: async_sessionmaker[AsyncSession]) -> int:
    """A quarter of a second later: the jobs placed and not finished (the simulated jobs run
    for a moment and succeed)."""
    await asyncio.sleep(0.25)
    async with transaction(sessions) as session:
        query = select(func.count()).select_from(Job).where(Job.state.in_(ACTIVE))
        return int((await session.execute(query)).scalar_one())


async def delta_cost(sessions: async_sessionmaker[AsyncSession], deltas: int) -> float:
    """What applying an agent's delta of 50 node changes to a 5,000-node cluster costs, as its
    stream applies it (proto message validated, cluster locked, delta applied, committed)."""
    spec = ClusterSpec.model_validate(
        {
            "nodeGroups": [{"count": 5000, "gpusPerNode": 8, "gpuModel": "H100"}],
            "topology": {"tiers": [{"name": "tor", "size": 8}, {"name": "spine", "size": 25}]},
        }
    )
    cluster = SimulatedCluster.from_spec("cost", spec)
    async with transaction(sessions) as session:
        row = await lock_cluster(session, name="cost")
        await replace_inventory(
            session, cluster=row, snapshot=snapshot_from(cluster.current().snapshot(1)), seq=1
        )
    rng, names, messages = random.Random(1), list(cluster.nodes), []
    for seq in range(2, deltas + 2):
        sent = cluster.current()
        for node in rng.sample(names, 50):
            cluster.update_node(node, used_gpus=rng.randrange(9))
        changes = cluster.take_changes()
        messages.append(delta_of_changes(sent, cluster, changes, seq, usages=True))
    started = time.process_time()
    for message in messages:
        async with transaction(sessions) as session:
            row = await lock_cluster(session, name="cost")
            await apply_delta(session, cluster=row, delta=delta_from(message), seq=message.seq)
    return (time.process_time() - started) / deltas * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=None, help="default: a fresh SQLite file")
    parser.add_argument("--requests", type=int, default=300)
    args = parser.parse_args()
    url = args.database_url or f"sqlite+aiosqlite:///{tempfile.mkdtemp()}/cost.db"
    for kind, ms in asyncio.run(measure(url, args.requests)).items():
        print(f"{kind:>20}: {ms:.2f} ms CPU per request")


if __name__ == "__main__":
    main()
