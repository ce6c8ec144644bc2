"""Load test: job submissions and reads against a real `vglobal server` (scheduling loop on)
while agents stream the inventory of many large clusters, all on loopback. Open loop: requests
leave on a fixed schedule whatever the answers, so latency includes queueing at the server.

    .venv/bin/python bench/load_bench.py --database-url postgresql+asyncpg://postgres@127.0.0.1/DB
    .venv/bin/python bench/load_bench.py --clusters 2 --nodes 500 --seconds 5   # quick
    .venv/bin/python bench/load_bench.py --database-url ... --replicas 2 --rate 200 --reads 100

`--replicas 2`: two Global replicas on the one Postgres (the leader election picks the one that
schedules), requests sent to them in turn, the clusters' agents connected to them in turn.

Reports p50/p95/p99 latency and errors per request kind, achieved rates, each process group's CPU
(cores, and milliseconds per job submitted, less each group's rate in `--idle-s` seconds of the
agents streaming alone first; with `--drain S` counted until every measured job has finished,
the whole lifecycle's cost even when the machine cannot keep up), the
jobs' lifecycle (Postgres: how many jobs a second were submitted, placed, dispatched, started
and finished during the measured part, and how long after submission), and the agents' delta
rate, measured after `--warmup` seconds (3) of the same load that are not counted. The agents
run in a child process (their own CPU budget on this 2-core machine is part of the load).
`--cprofile FILE` runs the server(s) under cProfile (misleading for SQLAlchemy's asyncio work:
see docs/benchmarks.md, "The job lifecycle at 200 jobs/s"; bench/lifecycle_cost_bench.py
breaks the CPU down by stage instead).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import random
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
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


def job(index: int, seconds: float | None = None) -> dict[str, object]:
    """A one-GPU job; `seconds`: its runningEstimate, how long the simulated agents run it
    (without one: the default estimate, a minute)."""
    document: dict[str, object] = {
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
    if seconds is not None:
        document["spec"]["runningEstimate"] = f"{int(seconds * 1000)}ms"  # type: ignore[index]
    return document


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def drive(
    servers: list[Server],
    rate: float,
    reads: float,
    seconds: float,
    *,
    first: int = 0,
    job_seconds: float | None = None,
) -> dict:
    """The load, sent with aiohttp (C-accelerated; the client's own CPU cost per request is a
    fraction of httpx's, and it shares the machine with the server); jobs numbered from
    `first`; requests go to the servers (replicas) in turn."""
    async with contextlib.AsyncExitStack() as stack:
        apis = [
            await stack.enter_async_context(
                aiohttp.ClientSession(
                    str(server.api.base_url),
                    connector=aiohttp.TCPConnector(limit=200),
                    headers={"Authorization": server.api.headers["Authorization"]},
                    timeout=aiohttp.ClientTimeout(total=60),
                )
            )
            for server in servers
        ]
        return await _drive(apis, rate, reads, seconds, first, job_seconds)


async def _drive(
    apis: list[aiohttp.ClientSession],
    rate: float,
    reads: float,
    seconds: float,
    first: int,
    job_seconds: float | None,
) -> dict:
    latencies: dict[str, list[float]] = {"submit": [], "list": [], "get": []}
    errors: dict[str, int] = {k: 0 for k in latencies}
    causes: dict[str, int] = {}  # "503", "ReadTimeout", ...
    uids: list[str] = []
    pending: set[asyncio.Task[None]] = set()
    turn = itertools.count()

    async def call(kind: str, method: str, path: str, **kwargs: object) -> None:
        started = time.perf_counter()
        api = apis[next(turn) % len(apis)]
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
                    call("submit", "POST", "/api/v1/jobs", json=job(first + submitted, job_seconds))
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


STAGES = ("submitted", "placed", "dispatched", "started", "finished")


async def lifecycle_stages(
    database_url: str, window: tuple[datetime, datetime]
) -> dict[str, float]:
    """Read from the database after a 2 s grace: per lifecycle stage, how many jobs (the
    warm-up's too) reached it during the measured `window` a second (the achieved rate), and
    how long the measured jobs took from submission to it (p50/p99; those not there yet are
    counted as missing, not as slow)."""
    await asyncio.sleep(2.0)
    engine = create_async_engine(database_url)
    columns = ", ".join(f"{stage}_at" for stage in STAGES)
    try:
        async with engine.connect() as db:
            rows = (await db.execute(text(f"SELECT name, {columns} FROM jobs"))).all()
    finally:
        await engine.dispose()
    begin, end = window
    seconds = (end - begin).total_seconds()
    measured = [r for r in rows if r.name.startswith("load-") and int(r.name[5:]) < 10**6]
    result: dict[str, float] = {"jobs": len(measured)}
    for index, stage in enumerate(STAGES, start=1):
        reached = [r[index] for r in rows if r[index] is not None]
        result[f"{stage}_per_s"] = sum(begin <= _utc(t) < end for t in reached) / seconds
        if index > 1:
            delays = [(r[index] - r[1]).total_seconds() for r in measured if r[index]]
            result[stage] = len(delays)
            result[f"{stage}_p50_s"] = percentile(delays, 0.5)
            result[f"{stage}_p99_s"] = percentile(delays, 0.99)
    return result


def _utc(moment: datetime) -> datetime:
    """SQLite hands back naive UTC datetimes, Postgres aware ones."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


async def run(args: argparse.Namespace) -> dict:
    env = {"VGLOBAL_DB_POOL_SIZE": "20", "VGLOBAL_WORKERS": str(args.workers)}
    if args.scheduler_process or args.no_scheduling:
        env["VGLOBAL_SCHEDULING__ENABLED"] = "false"
    async with contextlib.AsyncExitStack() as stack:
        servers = [  # one after the other: the first migrates the database
            await stack.enter_async_context(
                global_server(args.database_url, env=env, cprofile=_cprofile_of(args, i))
            )
            for i in range(args.replicas)
        ]
        scheduler = await _scheduler_process(args)
        tokens = {}
        for i in range(args.clusters):
            name = f"load-{i:02d}"
            created = await servers[0].api.post("/api/v1/clusters", json={"name": name})
            tokens[name] = created.json()["agentToken"]
        agents = await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            "agents",
            ",".join(server.grpc_target for server in servers),
            json.dumps(tokens),
            str(args.nodes),
            str(args.idle_s + args.warmup + args.seconds + args.drain + 5),  # through the drain
            str(args.node_updates),
            stdout=asyncio.subprocess.PIPE,
            preexec_fn=_background(args.background_nice),
        )
        try:
            assert agents.stdout is not None
            line = await asyncio.wait_for(agents.stdout.readline(), timeout=600)
            assert line.strip() == b"synced", line
            result = await _measure(args, servers, agents.pid, scheduler)
            streamed = json.loads((await agents.stdout.readline()) or b"{}")
        finally:
            for child in (agents, scheduler):
                if child is not None and child.returncode is None:
                    child.terminate()
                    await child.wait()
    result["server"] = {
        "replicas": args.replicas,
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


def _cprofile_of(args: argparse.Namespace, replica: int) -> str | None:
    if args.cprofile is None:
        return None
    return args.cprofile if args.replicas == 1 else f"{args.cprofile}.{replica}"


def _background(nice: int) -> Callable[[], None]:
    return lambda: os.nice(nice)  # type: ignore[func-returns-value]


async def _scheduler_process(args: argparse.Namespace) -> asyncio.subprocess.Process | None:
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


class CpuMeter:
    """CPU seconds each process group used since `start()`, the whole machine's too."""

    def __init__(self, groups: dict[str, Callable[[], dict[int, float]]]) -> None:
        self.groups = groups
        self.start()

    def start(self) -> None:
        self._before = {k: f() for k, f in self.groups.items()}
        self._busy, self._started = machine_busy_seconds(), time.monotonic()

    def used(self) -> tuple[dict[str, float], float]:
        """The groups' CPU seconds, and the wall seconds, since `start()`."""
        used = {
            k: sum(v - self._before[k].get(pid, 0.0) for pid, v in f().items())
            for k, f in self.groups.items()
        }
        used["whole machine"] = machine_busy_seconds() - self._busy
        return used, time.monotonic() - self._started


async def _measure(
    args: argparse.Namespace,
    servers: list[Server],
    agents: int,
    scheduler: asyncio.subprocess.Process | None,
) -> dict:
    """The idle baseline (agents streaming, no requests), the warm-up, then the measured load
    with every process group's CPU over it (in cores), then, with `--drain`, until every
    measured job finished (CPU per job submitted, the idle baseline subtracted), then the
    jobs' lifecycle stages."""
    groups = {
        "server": lambda: cpu_seconds(pids=set().union(*(process_tree(s.pid) for s in servers))),
        "agents": lambda: cpu_seconds(pids={agents}),
        "postgres": lambda: cpu_seconds("postgres"),
        "load client": lambda: cpu_seconds(pids={os.getpid()}),
    }
    if scheduler is not None:
        groups["scheduler"] = lambda: cpu_seconds(pids={scheduler.pid})
    meter = CpuMeter(groups)
    await asyncio.sleep(args.idle_s)
    used, elapsed = meter.used()
    idle = {k: v / elapsed for k, v in used.items()}
    if args.warmup > 0:  # fresh pool connections, first statements: not counted
        await drive(
            servers, args.rate, args.reads, args.warmup, first=10**6, job_seconds=args.job_seconds
        )
    profilers = [
        await _profiler(s.pid, _numbered(args.profile, i), args.seconds)
        for i, s in enumerate(servers)
    ]
    if scheduler is not None and args.profile:
        profilers.append(await _profiler(scheduler.pid, f"{args.profile}.scheduler", args.seconds))
    meter.start()
    begin = datetime.now(UTC)
    result = await drive(servers, args.rate, args.reads, args.seconds, job_seconds=args.job_seconds)
    end = datetime.now(UTC)
    used, elapsed = meter.used()
    result["cpu_cores"] = {k: v / elapsed for k, v in used.items()}
    result["idle_cpu_cores"] = idle
    result["load_average"] = os.getloadavg()
    if args.drain and args.database_url and not args.no_scheduling:
        result["unfinished"] = await _drained(args.database_url, args.drain)
        used, elapsed = meter.used()
    submitted = max(1, result["submit"]["requests"])
    result["cpu_ms_per_job"] = {
        k: 1000 * (v - idle[k] * elapsed) / submitted for k, v in used.items()
    }
    for profiler in profilers:
        if profiler is not None:
            await profiler.wait()
    if args.database_url and not args.no_scheduling:
        result["lifecycle"] = await lifecycle_stages(args.database_url, (begin, end))
    return result


async def _drained(database_url: str, within: float) -> int:
    """Wait until every measured job has finished, at most `within` seconds; how many had
    not."""
    engine = create_async_engine(database_url)
    deadline = time.monotonic() + within
    unfinished = -1
    try:
        while unfinished and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
            async with engine.connect() as db:
                query = text(
                    "SELECT count(*) FROM jobs WHERE finished_at IS NULL AND name LIKE 'load-0%'"
                )
                unfinished = int((await db.execute(query)).scalar_one())
    finally:
        await engine.dispose()
    return unfinished


def _numbered(path: str | None, index: int) -> str | None:
    return None if path is None else path if index == 0 else f"{path}.{index}"


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
        "--job-seconds",
        type=float,
        default=1.0,
        help="how long each job runs (its runningEstimate; the simulated agents run it that "
        "long, then report it Succeeded)",
    )
    parser.add_argument(
        "--idle-s",
        type=float,
        default=5.0,
        help="seconds of the agents streaming alone first: each group's CPU then is the idle "
        "baseline subtracted from the CPU per job",
    )
    parser.add_argument(
        "--drain",
        type=float,
        default=0.0,
        metavar="S",
        help="after the load, wait until every measured job finished (at most S seconds) and "
        "count the CPU per job over the load and that wait (Postgres): what the whole lifecycle "
        "costs, even on a machine too busy to keep up",
    )
    parser.add_argument(
        "--replicas",
        type=int,
        default=1,
        help="Global replicas (server processes) on the one database (more than 1: Postgres "
        "only): requests go to them in turn, the clusters' agents connect to them in turn, and "
        "their leader election picks the one that schedules",
    )
    parser.add_argument(
        "--cprofile",
        metavar="FILE",
        help="run each server under cProfile (main thread), stats written to FILE (FILE.N for "
        "replica N) when it stops; read them with pstats",
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
    if "unfinished" in result:
        print("measured jobs not finished after the drain:", result["unfinished"])
    print(
        "CPU ms per job (idle subtracted):",
        ", ".join(f"{k} {v:.2f}" for k, v in result["cpu_ms_per_job"].items()),
    )
    print("load average (1, 5, 15 min):", " ".join(f"{v:.2f}" for v in result["load_average"]))
    if "lifecycle" in result:
        d = result["lifecycle"]
        print(f"lifecycle of {d['jobs']} measured jobs; achieved per s:", end=" ")
        print(", ".join(f"{stage} {d[stage + '_per_s']:.0f}" for stage in STAGES))
        for stage in STAGES[1:]:
            print(
                f"  {stage}: {d[stage]} (p50 {d[stage + '_p50_s']:.2f} s, "
                f"p99 {d[stage + '_p99_s']:.2f} s after submission)"
            )
    for kind in ("submit", "list", "get"):
        r = result[kind]
        print(
            f"{kind:>6}: {r['requests']} requests, {r['per_s']:.0f}/s, p50 {r['p50_ms']:.1f} ms, "
            f"p95 {r['p95_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms, {r['errors']} errors"
        )


if __name__ == "__main__":
    main()
