"""Load test: job submissions and reads against a real `vglobal server` (scheduling loop on)
while agents stream the inventory of many large clusters, all on loopback. Open loop: requests
leave on a fixed schedule whatever the answers, so latency includes queueing at the server.

    .venv/bin/python bench/load_bench.py --database-url postgresql+asyncpg://postgres@127.0.0.1/DB
    .venv/bin/python bench/load_bench.py --clusters 2 --nodes 500 --seconds 5   # quick

Reports p50/p95/p99 latency and errors per request kind, achieved rates, and the agents' delta
rate during the run, measured after `--warmup` seconds (3) of the same load that are not counted. The agents run in a child process (their own CPU budget on this 2-core
machine is part of the load).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import time
from pathlib import Path
from subprocess import DEVNULL
from typing import IO

import aiohttp
import uvloop
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness import (  # noqa: E402
    Server,
    cpu_seconds,
    global_server,
    machine_busy_seconds,
    process_tree,
    wait_acked,
)

from core_agent.client import AgentClient  # noqa: E402
from core_agent.simulated.cluster import ClusterSpec, SimulatedCluster  # noqa: E402


async def agents_main(
    target: str, tokens: dict[str, str], nodes: int, seconds: float, updates_per_s: float
) -> None:
    """Child process: full sync of every cluster, then `updates_per_s` node changes a second
    spread over the clusters (ten batches a second), for `seconds`; prints how many node
    updates were made. The agents coalesce changes as deployed (their default window)."""
    spec = ClusterSpec.model_validate(
        {
            "nodeGroups": [{"count": nodes, "gpusPerNode": 8, "gpuModel": "H100"}],
            "topology": {"tiers": [{"name": "tor", "size": 8}, {"name": "spine", "size": 25}]},
        }
    )
    clusters = {name: SimulatedCluster.from_spec(name, spec) for name in tokens}
    clients = [
        AgentClient(cluster=n, target=target, token=t, source=clusters[n])
        for n, t in tokens.items()
    ]
    stop = asyncio.Event()
    tasks = [asyncio.create_task(c.run(stop=stop)) for c in clients]
    await wait_acked(clients)
    print("synced", flush=True)
    rng = random.Random(2)
    names = {n: list(c.nodes) for n, c in clusters.items()}
    per_batch = max(1, round(updates_per_s / 10 / len(clusters)))
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


def job(index: int) -> dict[str, object]:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": f"load-{index:06d}", "namespace": "default"},
        "spec": {
            "tasks": [
                {
                    "name": "worker",
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "c",
                                    "image": "i",
                                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                                }
                            ]
                        }
                    },
                }
            ]
        },
    }


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def drive(
    server: Server, rate: float, reads: float, seconds: float, *, first: int = 0
) -> dict:
    """The load, sent with aiohttp (C-accelerated; the client's own CPU cost per request is a
    fraction of httpx's, and it shares the machine with the server); jobs numbered from
    `first`."""
    connector = aiohttp.TCPConnector(limit=200)
    async with aiohttp.ClientSession(
        str(server.api.base_url),
        connector=connector,
        headers={"Authorization": server.api.headers["Authorization"]},
        timeout=aiohttp.ClientTimeout(total=60),
    ) as api:
        return await _drive(api, rate, reads, seconds, first)


async def _drive(
    api: aiohttp.ClientSession, rate: float, reads: float, seconds: float, first: int = 0
) -> dict:
    latencies: dict[str, list[float]] = {"submit": [], "list": [], "get": []}
    errors: dict[str, int] = {k: 0 for k in latencies}
    causes: dict[str, int] = {}  # "503", "ReadTimeout", ...
    uids: list[str] = []
    pending: set[asyncio.Task[None]] = set()

    async def call(kind: str, method: str, path: str, **kwargs: object) -> None:
        started = time.perf_counter()
        try:
            async with api.request(method, path, **kwargs) as response:  # type: ignore[arg-type]
                ok = response.status < 400
                if ok and kind == "submit":
                    uids.append((await response.json())["uid"])
                else:
                    await response.read()
                cause = str(response.status)
        except (aiohttp.ClientError, TimeoutError) as exc:
            ok, cause = False, type(exc).__name__
        if not ok:
            causes[f"{kind} {cause}"] = causes.get(f"{kind} {cause}", 0) + 1
        latencies[kind].append(time.perf_counter() - started)
        if not ok:
            errors[kind] += 1

    begin = time.perf_counter()
    submitted = read = 0
    while (now := time.perf_counter() - begin) < seconds:
        while submitted < now * rate:
            pending.add(
                asyncio.create_task(
                    call("submit", "POST", "/api/v1/jobs", json=job(first + submitted))
                )
            )
            submitted += 1
        while read < now * reads:
            if read % 2 == 0 or not uids:
                task = call("list", "GET", "/api/v1/jobs", params={"limit": 20})
            else:
                task = call("get", "GET", f"/api/v1/jobs/{random.choice(uids)}")
            pending.add(asyncio.create_task(task))
            read += 1
        pending = {t for t in pending if not t.done()}
        await asyncio.sleep(0.002)
    await asyncio.gather(*pending)
    elapsed = time.perf_counter() - begin
    return {"error_causes": causes} | {
        kind: {
            "requests": len(values),
            "per_s": len(values) / elapsed,
            "p50_ms": 1000 * percentile(values, 0.5),
            "p95_ms": 1000 * percentile(values, 0.95),
            "p99_ms": 1000 * percentile(values, 0.99),
            "errors": errors[kind],
        }
        for kind, values in latencies.items()
    }


def _log_file(path: str | None) -> IO[bytes] | int:
    """Where a child process's log goes: the file at `path`, else nowhere."""
    return Path(path).open("wb") if path else DEVNULL


async def scheduling_delays(database_url: str) -> dict[str, float]:
    """How long the measured jobs (not the warm-up's) took from submission to placed and to
    running, read from the database after a 2 s grace; jobs not yet there are counted."""
    await asyncio.sleep(2.0)
    engine = create_async_engine(database_url)
    try:
        async with engine.connect() as db:
            rows = (
                await db.execute(text("SELECT name, submitted_at, placed_at, started_at FROM jobs"))
            ).all()
    finally:
        await engine.dispose()
    measured = [r for r in rows if r.name.startswith("load-") and int(r.name[5:]) < 10**6]
    result: dict[str, float] = {"jobs": len(measured)}
    for step, column in (("placed", 2), ("running", 3)):
        delays = [(r[column] - r.submitted_at).total_seconds() for r in measured if r[column]]
        result[step] = len(delays)
        result[f"{step}_p50_s"] = percentile(delays, 0.5)
        result[f"{step}_p99_s"] = percentile(delays, 0.99)
    return result


async def run(args: argparse.Namespace) -> dict:
    pool = {"VGLOBAL_DB_POOL_SIZE": "20", "VGLOBAL_WORKERS": str(args.workers)}
    if args.scheduler_process or args.no_scheduling:
        pool["VGLOBAL_SCHEDULING__ENABLED"] = "false"

    def background() -> None:
        os.nice(args.background_nice)

    async with global_server(args.database_url, env=pool) as server:
        scheduler = (
            await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "volcano_global.cli.main",
                "scheduler",
                *(
                    ["--interval-s", str(args.scheduler_interval_s)]
                    if args.scheduler_interval_s
                    else []
                ),
                env={
                    **os.environ,
                    "VGLOBAL_DATABASE_URL": args.database_url or "",
                    "VGLOBAL_LOG_LEVEL": "info" if args.scheduler_log else "warning",
                },
                stderr=_log_file(args.scheduler_log),
                preexec_fn=background,
            )
            if args.scheduler_process and not args.no_scheduling
            else None
        )
        tokens = {}
        for i in range(args.clusters):
            name = f"load-{i:02d}"
            tokens[name] = (await server.api.post("/api/v1/clusters", json={"name": name})).json()[
                "agentToken"
            ]
        agents = await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            "agents",
            server.grpc_target,
            json.dumps(tokens),
            str(args.nodes),
            str(args.warmup + args.seconds + 5),
            str(args.node_updates),
            stdout=asyncio.subprocess.PIPE,
            preexec_fn=background,
        )
        try:
            assert agents.stdout is not None
            line = await asyncio.wait_for(agents.stdout.readline(), timeout=600)
            assert line.strip() == b"synced", line
            if args.warmup > 0:  # fresh pool connections, first statements: not counted
                await drive(server, args.rate, args.reads, args.warmup, first=10**6)
            profilers = [await _profiler(server.pid, args.profile, args.seconds)]
            if scheduler is not None and args.profile:
                profilers.append(
                    await _profiler(scheduler.pid, f"{args.profile}.scheduler", args.seconds)
                )
            groups = {
                "server": lambda: cpu_seconds(pids=process_tree(server.pid)),
                "agents": lambda: cpu_seconds(pids={agents.pid}),
                "postgres": lambda: cpu_seconds("postgres"),
                "load client": lambda: cpu_seconds(pids={os.getpid()}),
            }
            if scheduler is not None:
                groups["scheduler"] = lambda: cpu_seconds(pids={scheduler.pid})
            before, started = {k: f() for k, f in groups.items()}, time.monotonic()
            busy = machine_busy_seconds()
            result = await drive(server, args.rate, args.reads, args.seconds)
            elapsed = time.monotonic() - started
            result["cpu_cores"] = {
                k: sum(v - before[k].get(pid, 0.0) for pid, v in f().items()) / elapsed
                for k, f in groups.items()
            } | {"whole machine": (machine_busy_seconds() - busy) / elapsed}
            for profiler in profilers:
                if profiler is not None:
                    await profiler.wait()
            if args.database_url and not args.no_scheduling:
                result["scheduling"] = await scheduling_delays(args.database_url)
            streamed = json.loads((await agents.stdout.readline()) or b"{}")
        finally:
            for child in (agents, scheduler):
                if child is not None and child.returncode is None:
                    child.terminate()
                    await child.wait()
        result["server"] = {
            "workers": args.workers,
            "scheduler_process": args.scheduler_process,
            "scheduling": not args.no_scheduling,
            "background_nice": args.background_nice,
        }
        result["agents"] = {
            "clusters": args.clusters,
            "nodes": args.nodes,
            "node_updates_per_s": streamed.get("node_updates", 0) / streamed.get("seconds", 1),
        }
        return result


async def _profiler(
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


def main() -> None:
    if sys.argv[1:2] == ["agents"]:
        target, tokens, nodes, seconds, updates = sys.argv[2:7]
        uvloop.run(  # as `vglobal agent` runs
            agents_main(target, json.loads(tokens), int(nodes), float(seconds), float(updates))
        )
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=None, help="default: a fresh SQLite file")
    parser.add_argument("--clusters", type=int, default=20)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--rate", type=float, default=200.0, help="submissions per second")
    parser.add_argument("--reads", type=float, default=100.0, help="reads per second")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument(
        "--warmup",
        type=float,
        default=3.0,
        help="seconds of the same load before the measured part (not counted)",
    )
    parser.add_argument(
        "--node-updates",
        type=float,
        default=1000.0,
        help="node changes a second over all clusters (1,000: each of 100,000 nodes changes "
        "every 100 s on average)",
    )
    parser.add_argument(
        "--workers", type=int, default=1, help="server processes (more than 1: Postgres only)"
    )
    parser.add_argument(
        "--scheduler-process",
        action="store_true",
        help="schedule in a separate `vglobal scheduler` process (Postgres only)",
    )
    parser.add_argument(
        "--no-scheduling",
        action="store_true",
        help="place nothing (no scheduling loop anywhere): the API and the agents' inventory "
        "streams alone, without the placed jobs' dispatch and status reports",
    )
    parser.add_argument(
        "--scheduler-interval-s",
        type=float,
        default=None,
        help="the scheduler process's period (`vglobal scheduler --interval-s`; default: its own)",
    )
    parser.add_argument(
        "--scheduler-log", metavar="FILE", help="the scheduler process's log (info level)"
    )
    parser.add_argument(
        "--background-nice",
        type=int,
        default=0,
        metavar="N",
        help="run the agents and the scheduler process at this nice value (10: they yield the "
        "CPU to the server and Postgres, as on their own machines)",
    )
    parser.add_argument(
        "--profile",
        metavar="FILE",
        help="sample the server with py-spy during the load; collapsed stacks written to FILE "
        "(and the scheduler process's to FILE.scheduler)",
    )
    # uvloop: the load generator shares the machine with what it measures; half the CPU.
    result = uvloop.run(run(parser.parse_args()))
    print(json.dumps(result, indent=2))
    print("errors by cause:", result["error_causes"] or "none")
    print("CPU cores used:", ", ".join(f"{k} {v:.2f}" for k, v in result["cpu_cores"].items()))
    if "scheduling" in result:
        d = result["scheduling"]
        print(
            f"scheduling: of {d['jobs']} jobs, {d['placed']} placed (p50 {d['placed_p50_s']:.2f} "
            f"s, p99 {d['placed_p99_s']:.2f} s after submission), {d['running']} running "
            f"(p50 {d['running_p50_s']:.2f} s, p99 {d['running_p99_s']:.2f} s)"
        )
    for kind in ("submit", "list", "get"):
        r = result[kind]
        print(
            f"{kind:>6}: {r['requests']} requests, {r['per_s']:.0f}/s, p50 {r['p50_ms']:.1f} ms, "
            f"p95 {r['p95_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms, {r['errors']} errors"
        )


if __name__ == "__main__":
    main()
