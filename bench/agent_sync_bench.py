"""Agent ingestion benchmark: full sync of N simulated clusters and steady delta ingestion,
through a real `vglobal server` process and real gRPC streams, with the server's peak memory.

    .venv/bin/python bench/agent_sync_bench.py                       # SQLite, 20 x 5,000 nodes
    .venv/bin/python bench/agent_sync_bench.py --database-url postgresql+asyncpg://postgres@127.0.0.1/DB
    .venv/bin/python bench/agent_sync_bench.py --clusters 2 --nodes 500 --seconds 3   # quick
    .venv/bin/python bench/agent_sync_bench.py --workers 2 --database-url postgresql+asyncpg://...

The agents run in this process (one asyncio task each); the Global runs in its own processes
(`--workers N`: a supervisor and N workers sharing the gRPC port, Postgres only), so its memory
and CPU are its own: both are summed over the server's process tree.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import time
from collections import deque
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import (
    backends,
    cpu_seconds,
    global_server,
    machine_busy_seconds,
    process_tree,
    wait_acked,
)

from core_agent.client import AgentClient
from core_agent.simulated.cluster import ClusterSpec, SimulatedCluster


def peak_rss_mib(pids: set[int]) -> float:
    """The sum of the processes' peak resident sets (each its own peak, so an upper bound on
    their peak together); processes that have ended count nothing."""
    total = 0
    for pid in pids:
        try:
            lines = Path(f"/proc/{pid}/status").read_text().splitlines()
        except OSError:
            continue
        total += next(int(line.split()[1]) for line in lines if line.startswith("VmHWM:"))
    return total / 1024


async def server_processes(root: int, workers: int) -> set[int]:
    """The server's process tree once all its workers are up (a worker that answered /readyz
    does not mean its siblings have started): the supervisor, multiprocessing's resource
    tracker (started with the first worker) and the workers."""
    for _ in range(600):
        pids = process_tree(root)
        if workers == 1 or len(pids) >= workers + 2:
            return pids
        await asyncio.sleep(0.1)
    raise RuntimeError(f"the server did not start {workers} workers")


async def run(args: argparse.Namespace) -> dict[str, float]:
    env = {"VGLOBAL_WORKERS": str(args.workers)}
    async with global_server(args.database_url, env=env, timeout=120) as server:
        api = server.api
        spec = ClusterSpec.model_validate(
            {
                "nodeGroups": [{"count": args.nodes, "gpusPerNode": 8, "gpuModel": "H100"}],
                "topology": {"tiers": [{"name": "tor", "size": 8}, {"name": "spine", "size": 25}]},
            }
        )
        clusters, clients = [], []
        for i in range(args.clusters):
            name = f"bench-{i:02d}"
            response = await api.post("/api/v1/clusters", json={"name": name})
            assert response.status_code == 201, response.text
            agent_token = response.json()["agentToken"]
            cluster = SimulatedCluster.from_spec(name, spec)
            clusters.append(cluster)
            clients.append(
                AgentClient(
                    cluster=name,
                    target=server.grpc_target,
                    token=agent_token,
                    source=cluster,
                    coalesce_s=0.0,
                )
            )
        stop = asyncio.Event()
        server_pids = await server_processes(server.pid, args.workers)
        async with backends(args.database_url) as backend_pids:

            async def read() -> dict[str, dict[int, float]]:
                return cpu_reading(server_pids, await backend_pids())

            before = await read()
            started = time.perf_counter()
            tasks = [asyncio.create_task(c.run(stop=stop)) for c in clients]
            await wait_acked(clients)
            full_sync = time.perf_counter() - started
            synced = await read()
            idle_cpu: dict[str, float] = {}
            if args.idle_seconds:  # the streams open, nothing sent but heartbeats
                await asyncio.sleep(args.idle_seconds)
                idle = await read()
                idle_cpu = cpu_spent(synced, idle)
                synced = idle
            updates, ingest_seconds = await drive_deltas(args, clusters, clients)
            end = await read()
        stop.set()
        await asyncio.gather(*tasks)
        totals = (await api.get("/api/v1/clusters")).json()["items"]
        assert all(c["nodes"]["total"] == args.nodes for c in totals)
        synced_nodes = args.clusters * args.nodes
        return {
            "full_sync_s": full_sync,
            "updates_per_s": updates / ingest_seconds,
            "updates": updates,
            "peak_rss_mib": peak_rss_mib(server_pids),
            "server_processes": len(server_pids),
            # CPU seconds per 1,000 node updates, by whom
            **{f"sync_{k}": v * 1000 / synced_nodes for k, v in cpu_spent(before, synced).items()},
            **{f"delta_{k}": v * 1000 / updates for k, v in cpu_spent(synced, end).items()},
            "sync_workers": sorted(cpu_by_pid(before, synced, server_pids), reverse=True),
            **{f"idle_{k}": v / args.idle_seconds for k, v in idle_cpu.items()},
        }


async def drive_deltas(
    args: argparse.Namespace, clusters: list[SimulatedCluster], clients: list[AgentClient]
) -> tuple[int, float]:
    """Rounds of `args.batch` node changes in every cluster for `args.seconds`, each change a
    real one (a node's used GPUs set to a value it does not hold: a change to the same value
    is no update, and the agent sends none); at most `args.in_flight` rounds unacknowledged
    (1: each acknowledged before the next is made). The node updates made and the seconds
    until the last was acknowledged."""
    rng = random.Random(1)
    names = [list(c.nodes) for c in clusters]
    rounds: deque[list[int]] = deque()  # each unacknowledged round's sequences, by client
    updates = 0
    started = time.perf_counter()
    while time.perf_counter() - started < args.seconds:
        sent = [c.seq for c in clients]
        for cluster, nodes in zip(clusters, names, strict=True):
            for name in rng.sample(nodes, args.batch):
                used = cluster.nodes[name].used_gpus
                cluster.update_node(name, used_gpus=(used + rng.randrange(1, 9)) % 9)
        updates += args.batch * len(clusters)
        await wait_sent(clients, sent)  # each round its own deltas: none merged with the next
        rounds.append([c.seq for c in clients])
        if len(rounds) >= args.in_flight:
            await wait_acked(clients, upto=rounds.popleft())
    await wait_acked(clients)
    return updates, time.perf_counter() - started


async def wait_sent(clients: list[AgentClient], before: list[int], within: float = 600) -> None:
    """Until every client has sent a delta after sequence `before[i]`."""
    deadline = time.monotonic() + within
    while any(c.seq <= seq for c, seq in zip(clients, before, strict=True)):
        if time.monotonic() > deadline:
            raise TimeoutError("agents did not send their deltas in time")
        await asyncio.sleep(0.001)


def cpu_reading(server_pids: set[int], backend_pids: set[int]) -> dict[str, dict[int, float]]:
    """CPU seconds so far of each process, by whom: the Global, the agents (this process), the
    database's backends; and the whole machine's busy seconds (under pid 0)."""
    return {
        "global": cpu_seconds(pids=server_pids),
        "agents": cpu_seconds(pids={os.getpid()}),
        "postgres": cpu_seconds(pids=backend_pids),
        "machine": {0: machine_busy_seconds()},
    }


def cpu_spent(
    before: dict[str, dict[int, float]], after: dict[str, dict[int, float]]
) -> dict[str, float]:
    """CPU seconds each side spent between two readings; a process that started in between
    counts from zero, one that ended in between is not counted."""
    return {
        side: sum(cpu - before[side].get(pid, 0.0) for pid, cpu in after[side].items())
        for side in after
    }


def cpu_by_pid(
    before: dict[str, dict[int, float]], after: dict[str, dict[int, float]], pids: set[int]
) -> list[float]:
    return [after["global"].get(p, 0.0) - before["global"].get(p, 0.0) for p in pids]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clusters", type=int, default=20)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--seconds", type=float, default=10.0, help="how long to drive deltas")
    parser.add_argument("--batch", type=int, default=500, help="node updates per cluster per delta")
    parser.add_argument(
        "--in-flight",
        type=int,
        default=2,
        help="rounds of deltas unacknowledged at most (1: each round acknowledged before the "
        "next is made, which leaves the Global idle while the agents build a round)",
    )
    parser.add_argument(
        "--idle-seconds",
        type=float,
        default=0.0,
        help="after the full sync, how long to measure the CPU spent with no deltas (per second)",
    )
    parser.add_argument("--database-url", default=None, help="default: a fresh SQLite file")
    parser.add_argument(
        "--workers", type=int, default=1, help="the Global's worker processes (Postgres only)"
    )
    args = parser.parse_args()
    if args.workers < 1:
        parser.error("--workers must be at least 1")
    if args.in_flight < 1:
        parser.error("--in-flight must be at least 1")
    if args.workers > 1 and not (args.database_url or "").startswith("postgresql"):
        parser.error("--workers > 1 needs Postgres (--database-url postgresql+asyncpg://...)")
    result = asyncio.run(run(args))
    db = (args.database_url or "sqlite").split(":")[0]
    print(
        f"{db}: {args.clusters} clusters x {args.nodes} nodes: full sync {result['full_sync_s']:.1f} s; "
        f"deltas: {result['updates_per_s']:,.0f} node updates/s ({result['updates']:,} in {args.seconds:g} s, "
        f"batches of {args.batch} per cluster, {args.in_flight} round(s) in flight)\n"
        f"Global ({args.workers} worker(s), {result['server_processes']} processes): "
        f"peak RSS {result['peak_rss_mib']:.0f} MiB (sum of each process's peak); "
        f"its processes' CPU s in the full sync: "
        + ", ".join(f"{s:.1f}" for s in result["sync_workers"])
        + "\nCPU s per 1,000 node updates (Global: all its processes; postgres: the backends "
        "serving the database; machine: every process on every core):"
    )
    if args.idle_seconds:
        print(
            "  CPU s per second with no deltas: "
            + ", ".join(
                f"{side} {result[f'idle_{side}']:.3f}"
                for side in ("global", "agents", "postgres", "machine")
            )
        )
    for phase in ("sync", "delta"):
        print(
            f"  {'full sync' if phase == 'sync' else 'deltas':>9}: "
            + ", ".join(
                f"{side} {result[f'{phase}_{side}']:.4f}"
                for side in ("global", "agents", "postgres", "machine")
            )
        )


if __name__ == "__main__":
    main()
