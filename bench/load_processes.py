"""The processes of a bench/load_bench.py run beside the load: the Global's replicas, the
simulated clusters' agents in a child process, the `vglobal scheduler` process, and py-spy
profilers."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from subprocess import DEVNULL
from typing import IO

from harness import Server, global_server, wait_acked

from core_agent.client import AgentClient
from core_agent.simulated.cluster import ClusterSpec, SimulatedCluster

LOAD_BENCH = Path(__file__).with_name("load_bench.py")  # its `agents` command is the child


async def start_replicas(
    stack: contextlib.AsyncExitStack, args: argparse.Namespace
) -> list[Server]:
    """`--replicas` Global servers on the one database, one after the other: the first
    migrates it."""
    # A loaded 2-core host: uvicorn's 5 s health check killed workers that were only busy.
    env = {
        "VGLOBAL_DB_POOL_SIZE": "20",
        "VGLOBAL_WORKERS": str(args.workers),
        "VGLOBAL_WORKER_HEALTHCHECK_TIMEOUT_S": "60",
    }
    if args.scheduler_process or args.no_scheduling:
        env["VGLOBAL_SCHEDULING__ENABLED"] = "false"
    return [
        await stack.enter_async_context(
            global_server(args.database_url, env=env, cprofile=_cprofile_of(args, i))
        )
        for i in range(args.replicas)
    ]


async def register_clusters(server: Server, count: int) -> dict[str, str]:
    """`count` clusters registered; their agent tokens by name."""
    tokens = {}
    for i in range(count):
        name = f"load-{i:02d}"
        created = await server.api.post("/api/v1/clusters", json={"name": name})
        tokens[name] = created.json()["agentToken"]
    return tokens


async def start_agents(
    servers: list[Server], tokens: dict[str, str], args: argparse.Namespace
) -> asyncio.subprocess.Process:
    """The agents' child process (`load_bench.py agents`, `agents_main`), streaming until
    after the drain."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        str(LOAD_BENCH),
        "agents",
        ",".join(server.grpc_target for server in servers),
        json.dumps(tokens),
        str(args.nodes),
        str(args.idle_s + args.warmup + args.seconds + args.drain + 5),  # through the drain
        str(args.node_updates),
        stdout=asyncio.subprocess.PIPE,
        preexec_fn=_background(args.background_nice),
    )


async def agents_main(
    targets: str, tokens: dict[str, str], nodes: int, seconds: float, updates_per_s: float
) -> None:
    """Child process: full sync of every cluster, then `updates_per_s` node changes a second
    spread over the clusters (ten batches a second), for `seconds`; prints how many node
    updates were made. The agents coalesce changes as deployed (their default window).
    `targets`: the replicas' gRPC addresses, comma-separated; the clusters take them in turn."""
    addresses = targets.split(",")
    spec = ClusterSpec.model_validate(
        {
            "nodeGroups": [{"count": nodes, "gpusPerNode": 8, "gpuModel": "H100"}],
            "topology": {"tiers": [{"name": "tor", "size": 8}, {"name": "spine", "size": 25}]},
        }
    )
    clusters = {name: SimulatedCluster.from_spec(name, spec) for name in tokens}
    clients = [
        AgentClient(cluster=n, target=addresses[i % len(addresses)], token=t, source=clusters[n])
        for i, (n, t) in enumerate(tokens.items())
    ]
    stop = asyncio.Event()
    tasks = [asyncio.create_task(c.run(stop=stop)) for c in clients]
    await wait_acked(clients)
    print("synced", flush=True)
    rng = random.Random(2)
    names = {n: list(c.nodes) for n, c in clusters.items()}
    # 0 a second is none: at least one node a batch would churn nodes the jobs' pods hold.
    per_batch = max(1, round(updates_per_s / 10 / len(clusters))) if updates_per_s > 0 else 0
    updates, started = 0, time.monotonic()
    while time.monotonic() - started < seconds:
        for name, cluster in clusters.items():
            for node in rng.sample(names[name], per_batch):
                cluster.update_node(node, used_gpus=rng.randrange(9))
        updates += per_batch * len(clusters)
        await asyncio.sleep(0.1)
    stop.set()
    await asyncio.gather(*tasks)
    print(json.dumps({"node_updates": updates, "seconds": time.monotonic() - started}), flush=True)


async def scheduler_process(args: argparse.Namespace) -> asyncio.subprocess.Process | None:
    """`vglobal scheduler` in a process of its own, if asked for."""
    if not args.scheduler_process or args.no_scheduling:
        return None
    interval = ["--interval-s", str(args.scheduler_interval_s)] if args.scheduler_interval_s else []
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "volcano_global.cli.main",
        "scheduler",
        *interval,
        env={
            **os.environ,
            "VGLOBAL_DATABASE_URL": args.database_url or "",
            "VGLOBAL_LOG_LEVEL": "info" if args.scheduler_log else "warning",
        },
        stderr=_log_file(args.scheduler_log),
        preexec_fn=_background(args.background_nice),
    )


def _cprofile_of(args: argparse.Namespace, replica: int) -> str | None:
    if args.cprofile is None:
        return None
    return args.cprofile if args.replicas == 1 else f"{args.cprofile}.{replica}"


def _background(nice: int) -> Callable[[], None]:
    return lambda: os.nice(nice)  # type: ignore[func-returns-value]


def _log_file(path: str | None) -> IO[bytes] | int:
    """Where a child process's log goes: the file at `path`, else nowhere."""
    return Path(path).open("wb") if path else DEVNULL


def numbered(path: str | None, index: int) -> str | None:
    return None if path is None else path if index == 0 else f"{path}.{index}"


async def start_profiler(
    pid: int, output: str | None, seconds: float
) -> asyncio.subprocess.Process | None:
    """py-spy sampling the server (all its threads, native frames off) while the load runs."""
    if output is None:
        return None
    return await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "py-spy"),
        "record",
        "--subprocesses",  # the workers of `--workers N`
        "--pid",
        str(pid),
        "--duration",
        str(int(seconds)),
        "--rate",
        "50",
        "--format",
        "raw",
        "--output",
        output,
        stdout=asyncio.subprocess.DEVNULL,
    )
