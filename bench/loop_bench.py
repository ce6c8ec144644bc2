"""Scheduling-loop benchmark: a steady stream of jobs through a real `vglobal server` process
(scheduling loop on), real gRPC agents running simulated clusters on a compressed clock.
Reports rounds per second, round wall time, and submit-to-running latency of split and whole
jobs.

    .venv/bin/python bench/loop_bench.py                    # SQLite, 4 clusters, 3 jobs/s, 40 s
    .venv/bin/python bench/loop_bench.py --database-url postgresql+asyncpg://postgres@127.0.0.1/DB
    .venv/bin/python bench/loop_bench.py --seconds 10 --rate 2   # quick

Latency is wall-clock (the control plane runs in real time; only the simulated jobs' run time
is compressed by --time-scale).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import re
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness import global_server  # noqa: E402

from core_agent.client import AgentClient  # noqa: E402
from core_agent.simulated.cluster import ClusterSpec, SimulatedCluster  # noqa: E402

CLUSTER = ClusterSpec.model_validate(
    {
        "nodeGroups": [{"count": 128, "gpusPerNode": 8, "gpuModel": "H100"}],
        "topology": {"tiers": [{"name": "tor", "size": 8}, {"name": "spine", "size": 4}]},
    }
)  # 1,024 GPUs each


def job(rng: random.Random, index: int) -> dict[str, Any]:
    """70% small (1-8 pods), 20% medium (16-64), 10% larger than any cluster (160 pods, split)."""
    draw = rng.random()
    pods = rng.randint(1, 8) if draw < 0.7 else rng.choice([16, 32, 64]) if draw < 0.9 else 160
    annotations = (
        {
            "global.volcano.sh/split": "auto",
            "global.volcano.sh/unit-pods": "16",
            "global.volcano.sh/crossing-gbps": "50",
        }
        if pods == 160
        else {}
    )
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": f"job-{index:05d}", "namespace": "bench", "annotations": annotations},
        "spec": {
            "runningEstimate": f"{rng.randint(5, 30)}m",
            "tasks": [
                {
                    "name": "worker",
                    "replicas": pods,
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "trainer",
                                    "image": "trainer:1",
                                    "resources": {"limits": {"nvidia.com/gpu": "8"}},
                                }
                            ]
                        }
                    },
                }
            ],
        },
    }


def metric(text: str, name: str) -> float:
    return sum(
        float(v) for v in re.findall(rf"^{re.escape(name)}(?:{{[^}}]*}})? (\S+)$", text, re.M)
    )


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def run(args: argparse.Namespace) -> dict[str, Any]:
    stop = asyncio.Event()
    tasks: list[asyncio.Task[None]] = []
    async with global_server(args.database_url) as server:
        api = server.api
        names = [f"c{i}" for i in range(args.clusters)]
        for name in names:
            agent_token = (await api.post("/api/v1/clusters", json={"name": name})).json()[
                "agentToken"
            ]
            cluster = SimulatedCluster.from_spec(name, CLUSTER)
            cluster.time_scale = args.time_scale
            client = AgentClient(
                cluster=name, target=server.grpc_target, token=agent_token, source=cluster
            )
            tasks.append(asyncio.create_task(client.run(stop=stop)))
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                await api.post(
                    "/api/v1/links", json={"clusterA": a, "clusterB": b, "capacityGbps": 400}
                )
        while True:
            items = (await api.get("/api/v1/clusters")).json()["items"]
            if all(c["state"] == "Ready" and c["inventoryGeneration"] > 0 for c in items):
                break
            await asyncio.sleep(0.2)

        before = (await api.get("/metrics")).text
        rng = random.Random(args.seed)
        uids, started = [], time.monotonic()
        index = 0
        while time.monotonic() - started < args.seconds:
            response = await api.post("/api/v1/jobs", json=job(rng, index))
            assert response.status_code == 201, response.text
            uids.append(response.json()["uid"])
            index += 1
            await asyncio.sleep(max(0.0, started + index / args.rate - time.monotonic()))
        window = time.monotonic() - started
        after = (await api.get("/metrics")).text
        deadline = time.monotonic() + args.seconds + 35 * 60 * args.time_scale + 60
        jobs: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            jobs = [(await api.get(f"/api/v1/jobs/{u}")).json() for u in uids]
            if all(j["state"] in ("Succeeded", "Failed") for j in jobs):
                break
            await asyncio.sleep(1.0)
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)

    def latency(j: dict[str, Any]) -> float | None:
        stamps = j["timestamps"]
        if not stamps["startedAt"]:
            return None
        end = datetime.fromisoformat(stamps["startedAt"])
        return (end - datetime.fromisoformat(stamps["submittedAt"])).total_seconds()

    def placed_to_running(j: dict[str, Any]) -> float | None:
        stamps = j["timestamps"]
        if not stamps["startedAt"] or not stamps["placedAt"]:
            return None
        end = datetime.fromisoformat(stamps["startedAt"])
        return (end - datetime.fromisoformat(stamps["placedAt"])).total_seconds()

    split = [j for j in jobs if len(j["clusters"]) > 1 or j["totalPods"] == 160]
    whole = [j for j in jobs if j not in split]
    committed = metric(after, 'vglobal_scheduling_rounds_total{outcome="committed"}') - metric(
        before, 'vglobal_scheduling_rounds_total{outcome="committed"}'
    )
    deferred = metric(after, "vglobal_jobs_deferred_total") - metric(
        before, "vglobal_jobs_deferred_total"
    )
    seconds = metric(after, "vglobal_scheduling_round_seconds_sum") - metric(
        before, "vglobal_scheduling_round_seconds_sum"
    )
    return {
        "database": "postgres" if (args.database_url or "").startswith("postgresql") else "sqlite",
        "jobs": len(jobs),
        "window_s": window,
        "rounds_per_s": committed / window,
        "deferred_jobs": int(deferred),
        "round_mean_s": seconds / committed if committed else float("nan"),
        "succeeded": sum(j["state"] == "Succeeded" for j in jobs),
        "split_jobs": len(split),
        "split_p50": percentile([x for j in split if (x := latency(j)) is not None], 0.5),
        "split_dispatch_p50": percentile(
            [x for j in split if (x := placed_to_running(j)) is not None], 0.5
        ),
        "whole_p50": percentile([x for j in whole if (x := latency(j)) is not None], 0.5),
        "whole_dispatch_p50": percentile(
            [x for j in whole if (x := placed_to_running(j)) is not None], 0.5
        ),
        "whole_dispatch_p95": percentile(
            [x for j in whole if (x := placed_to_running(j)) is not None], 0.95
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--clusters", type=int, default=4)
    parser.add_argument("--rate", type=float, default=3.0, help="job submissions per second")
    parser.add_argument("--seconds", type=float, default=40.0, help="submission window")
    parser.add_argument("--time-scale", type=float, default=0.02)
    parser.add_argument("--seed", type=int, default=1)
    result = asyncio.run(run(parser.parse_args()))
    print("| " + " | ".join(result) + " |")
    print("|" + "---|" * len(result))
    print(
        "| "
        + " | ".join(f"{v:.3f}" if isinstance(v, float) else str(v) for v in result.values())
        + " |"
    )


if __name__ == "__main__":
    main()
