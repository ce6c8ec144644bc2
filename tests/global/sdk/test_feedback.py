"""Feedback: a training process reports measured step time and bytes, and the checkpoints it
saves, with the job token the agent received for its share; the Global keeps the running
figures and uses the measured rate for the job's later placements. Real server process, real gRPC agent, real HTTP."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import httpx
import pytest

from core_agent.simulated.cluster import ClusterSpec, SimulatedCluster
from tests.agents import join
from tests.conftest import ADMIN_TOKEN
from tests.factories import REPLY_S, eventually, job_document
from tests.server_process import ServerProcess
from volcano_global.jobspec import SplitPolicy
from volcano_global.jobspec.members import rendezvous_env
from volcano_global.rpc.shares import ShareAssignment
from volcano_global.sdk import ReportError, Runtime
from volcano_global.services.scheduling.round_input import with_measurements

SPEC = ClusterSpec.model_validate({"nodeGroups": [{"count": 4, "gpusPerNode": 8}]})


def env_of(assignment: ShareAssignment, api: str) -> dict[str, str]:
    """What the Kubernetes source injects for this share (the same function builds it)."""
    return {**rendezvous_env(assignment, api_url=api), "VC_TASK_INDEX": "0", "LOCAL_RANK": "0"}


@pytest.fixture
def server(tmp_path: Path) -> ServerProcess:
    process = ServerProcess(f"sqlite+aiosqlite:///{tmp_path}/f.db", tmp_path, scheduling=True)
    process.start()
    yield process  # type: ignore[misc]
    process.stop()


async def test_a_job_reports_with_its_own_token_only(server: ServerProcess, tmp_path: Path) -> None:
    api = httpx.AsyncClient(
        timeout=REPLY_S, base_url=server.url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
    )
    cluster = SimulatedCluster.from_spec("east", SPEC)
    stop = asyncio.Event()
    task = await join(api, "east", cluster, target=server.grpc_target, stop=stop)
    try:
        uids = []
        for name in ("first", "second"):
            doc = job_document(name, replicas=1, runningEstimate="10h")
            uids.append((await api.post("/api/v1/jobs", json=doc)).json()["uid"])

        async def both_running() -> bool:
            states = {(await api.get(f"/api/v1/jobs/{u}")).json()["state"] for u in uids}
            return states == {"Running"}

        await eventually(both_running)
        share = {s.assignment.job_uid: s.assignment for s in cluster.shares.values()}
        first = Runtime.from_env(env_of(share[uids[0]], server.url), procs_per_pod=8)
        figures = await asyncio.to_thread(
            first.report,
            step_time_s=2.0,
            bytes_per_step=14e9,
            env=env_of(share[uids[0]], server.url),
        )
        # V = 8 x 14e9 bits, tau = 0.1 x 2 s: 560 Gbps.
        assert figures["samples"] == 1
        assert figures["allreduceGbps"] == pytest.approx(560.0)
        await asyncio.to_thread(
            first.report,
            step_time_s=4.0,
            bytes_per_step=14e9,
            env=env_of(share[uids[0]], server.url),
        )
        job = (await api.get(f"/api/v1/jobs/{uids[0]}")).json()
        assert job["measurements"]["samples"] == 2
        assert job["measurements"]["stepTimeSeconds"] == pytest.approx(3.0)  # the mean so far

        # The second job's token cannot report for the first.
        stolen = {
            **env_of(share[uids[0]], server.url),
            "VGLOBAL_JOB_TOKEN": share[uids[1]].job_token,
        }
        with pytest.raises(ReportError, match="403"):
            await asyncio.to_thread(first.report, step_time_s=1.0, bytes_per_step=1.0, env=stolen)

        # A checkpoint saved: the job shows it (preemption counts the work lost from it).
        # Its size and where it was written (this share's cluster) too: what a restore moves.
        saved = await asyncio.to_thread(
            first.checkpointed,
            step=1200,
            size_bytes=2 << 40,
            env=env_of(share[uids[0]], server.url),
        )
        assert (saved["step"], saved["sizeBytes"], saved["cluster"]) == (1200, 2 << 40, "east")
        job = (await api.get(f"/api/v1/jobs/{uids[0]}")).json()
        assert job["checkpoint"] == saved
        with pytest.raises(ReportError, match="422"):
            await asyncio.to_thread(
                first.checkpointed, step=-1, env=env_of(share[uids[0]], server.url)
            )
        with pytest.raises(ReportError, match="403"):
            await asyncio.to_thread(first.checkpointed, step=1, env=stolen)

        # Delivered assignments keep no token in the outbox.
        rows = sqlite3.connect(tmp_path / "f.db").execute("SELECT payload FROM outbox").fetchall()
        assert rows
        assert all("job_token" not in json.loads(p) for (p,) in rows)
    finally:
        stop.set()
        await task
        await api.aclose()


def test_later_placements_use_the_measured_rate() -> None:
    split = SplitPolicy(mode="auto", unit_pods=4, max_clusters=2, crossing_gbps=933.3)
    measured = {"allreduceGbps": 560.0}
    assert with_measurements(split, measured).crossing_gbps == 560.0
    assert with_measurements(split, None).crossing_gbps == 933.3
    never = SplitPolicy(mode="never", unit_pods=4)
    assert with_measurements(never, measured).crossing_gbps is None
