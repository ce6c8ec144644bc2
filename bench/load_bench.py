"""Load test: job submissions and reads against a real `vglobal server` (scheduling loop on)
while agents stream the inventory of many large clusters, all on loopback. Open loop: requests
leave on a fixed schedule whatever the answers, so latency includes queueing at the server.

    .venv/bin/python bench/load_bench.py --database-url postgresql+asyncpg://postgres@127.0.0.1/DB
    .venv/bin/python bench/load_bench.py --clusters 2 --nodes 500 --seconds 5   # quick
    .venv/bin/python bench/load_bench.py --database-url ... --replicas 2 --rate 200 --reads 100

`--replicas 2`: two Global replicas on the one Postgres (the leader election picks the one that
schedules), requests sent to them in turn, the clusters' agents connected to them in turn.

Reports p50/p95/p99 latency and errors per request kind, achieved rates, each process group's CPU
(with `--replicas` over 1, each replica's too: the one that schedules and the others; in
cores, and milliseconds per job submitted, less each group's rate in `--idle-s` seconds of the
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
import json
import os
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import uvloop

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import pg_statements  # noqa: E402
from harness import Server, cpu_seconds, machine_busy_seconds, process_tree  # noqa: E402
from load_processes import (  # noqa: E402
    agents_main,
    numbered,
    register_clusters,
    scheduler_process,
    start_agents,
    start_profiler,
    start_replicas,
)
from load_readouts import (  # noqa: E402
    STAGES,
    drained,
    lag_quantile,
    leading,
    lifecycle_stages,
    loop_lag_buckets,
    scrape,
)
from load_requests import drive  # noqa: E402


async def run(args: argparse.Namespace) -> dict:
    if args.pg_statements:  # refused before a minute of setup, not after it
        why = "--pg-statements needs --database-url (Postgres)"
        if args.database_url:
            why = await pg_statements.reset(args.database_url)
        if why is not None:
            raise SystemExit(why)
    async with contextlib.AsyncExitStack() as stack:
        servers = await start_replicas(stack, args)
        scheduler = await scheduler_process(args)
        tokens = await register_clusters(servers[0], args.clusters)
        agents = await start_agents(servers, tokens, args)
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
    if len(servers) > 1:  # each replica's share: the one that schedules and the others
        for i, server in enumerate(servers):
            groups[f"replica {i}"] = lambda pid=server.pid: cpu_seconds(pids=process_tree(pid))
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
        await start_profiler(s.pid, numbered(args.profile, i), args.seconds)
        for i, s in enumerate(servers)
    ]
    if scheduler is not None and args.profile:
        profilers.append(
            await start_profiler(scheduler.pid, f"{args.profile}.scheduler", args.seconds)
        )
    # Before the statements' counts reset.
    lags = [loop_lag_buckets(await scrape(s)) for s in servers]
    if args.pg_statements:
        await pg_statements.reset(args.database_url)
    meter.start()
    begin = datetime.now(UTC)
    result = await drive(servers, args.rate, args.reads, args.seconds, job_seconds=args.job_seconds)
    end = datetime.now(UTC)
    used, elapsed = meter.used()
    scraped = [await scrape(s) for s in servers]
    result["loop_lag_p99"] = [
        lag_quantile(before, loop_lag_buckets(after), 0.99)
        for before, after in zip(lags, scraped, strict=True)
    ]
    result["leading"] = [leading(after) for after in scraped]  # which replica schedules
    result["cpu_cores"] = {k: v / elapsed for k, v in used.items()}
    result["idle_cpu_cores"] = idle
    result["load_average"] = os.getloadavg()
    if args.drain and args.database_url and not args.no_scheduling:
        result["unfinished"] = await drained(args.database_url, args.drain)
        used, elapsed = meter.used()
    submitted = max(1, result["submit"]["requests"])
    result["cpu_ms_per_job"] = {
        k: 1000 * (v - idle[k] * elapsed) / submitted for k, v in used.items()
    }
    for profiler in profilers:
        if profiler is not None:
            await profiler.wait()
    if args.pg_statements:  # before the readouts' own statements
        found = await pg_statements.top(args.database_url, args.pg_statements)
        result["pg_statements"] = [s._asdict() for s in found]
    if args.database_url and not args.no_scheduling:
        result["lifecycle"] = await lifecycle_stages(args.database_url, (begin, end))
    return result


def main() -> None:
    if sys.argv[1:2] == ["agents"]:
        target, tokens, nodes, seconds, updates = sys.argv[2:7]
        uvloop.run(  # as `vglobal agent` runs
            agents_main(target, json.loads(tokens), int(nodes), float(seconds), float(updates))
        )
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    _add_load_options(parser)
    _add_process_options(parser)
    # uvloop: the load generator shares the machine with what it measures; half the CPU.
    result = uvloop.run(run(parser.parse_args()))
    _print_report(result)


def _add_load_options(parser: argparse.ArgumentParser) -> None:
    """The load, the server's workers, and how long each phase of the run lasts."""
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


def _add_process_options(parser: argparse.ArgumentParser) -> None:
    """The replicas, the scheduler process, the children's nice value, and profiling."""
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
    parser.add_argument(
        "--pg-statements",
        type=int,
        default=0,
        metavar="N",
        help="after the run, the N statements that touched the most of Postgres' shared "
        "buffers from the measured load on, from pg_stat_statements (it must be preloaded: "
        "bench/pg_statements.py)",
    )


def _print_report(result: dict) -> None:
    """The result as JSON, then a summary a line a measure."""
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
    if "pg_statements" in result:
        statements = [pg_statements.Statement(**s) for s in result["pg_statements"]]
        pg_statements.print_top(statements, jobs=result["submit"]["requests"])
    for kind in ("submit", "list", "get"):
        r = result[kind]
        print(
            f"{kind:>6}: {r['requests']} requests, {r['per_s']:.0f}/s, p50 {r['p50_ms']:.1f} ms, "
            f"p95 {r['p95_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms, {r['errors']} errors"
        )
    print(
        "event loop lag p99 in the measured load, by replica (its bucket; 0.25 s probes):",
        ", ".join(result["loop_lag_p99"]),
    )
    if len(result["by_replica"]) > 1:
        print("every request by replica (each kind sent to the replicas in turn):")
        for i, r in enumerate(result["by_replica"]):
            leads = " (leads: runs the rounds)" if result["leading"][i] else ""
            print(
                f"  replica {i}{leads}: {r['requests']} requests, "
                f"p50 {r['p50_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms"
            )


if __name__ == "__main__":
    main()
