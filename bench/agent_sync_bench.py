"""Agent ingestion benchmark: full sync of N simulated clusters and steady delta ingestion,
through a real `vglobal server` process and real gRPC streams, with the server's peak memory.

    .venv/bin/python bench/agent_sync_bench.py                       # SQLite, 20 x 5,000 nodes
    .venv/bin/python bench/agent_sync_bench.py --database-url postgresql+asyncpg://postgres@127.0.0.1/DB
    .venv/bin/python bench/agent_sync_bench.py --clusters 2 --nodes 500 --seconds 3   # quick

The agents run in this process (one asyncio task each); the Global runs alone in its own
process, so its memory is its own.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import cpu_seconds, global_server, process_tree, wait_acked

from core_agent.client import AgentClient
from core_agent.simulated.cluster import ClusterSpec, SimulatedCluster


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_of(pids: set[int]) -> float:
    return sum(cpu_seconds(pids=pids).values())


async def run(args: argparse.Namespace) -> dict[str, float]:
    async with global_server(args.database_url, timeout=120) as server:
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
        server_pids, own = process_tree(server.pid), {os.getpid()}
        cpu_before = cpu_of(server_pids), cpu_of(own)
        started = time.perf_counter()
        tasks = [asyncio.create_task(c.run(stop=stop)) for c in clients]
        await wait_acked(clients)
        full_sync = time.perf_counter() - started
        cpu_synced = cpu_of(server_pids), cpu_of(own)

        rng = random.Random(1)
        names = [list(c.nodes) for c in clusters]
        updates = 0
        started = time.perf_counter()
        while time.perf_counter() - started < args.seconds:
            for cluster, nodes in zip(clusters, names, strict=True):
                for name in rng.sample(nodes, args.batch):
                    cluster.update_node(name, used_gpus=rng.randrange(9))
            await asyncio.sleep(0)
            await wait_acked(clients)
            updates += args.batch * len(clusters)
        ingest_seconds = time.perf_counter() - started
        cpu_end = cpu_of(server_pids), cpu_of(own)
        stop.set()
        await asyncio.gather(*tasks)
        totals = (await api.get("/api/v1/clusters")).json()["items"]
        assert all(c["nodes"]["total"] == args.nodes for c in totals)
        return {
            "full_sync_s": full_sync,
            "updates_per_s": updates / ingest_seconds,
            "updates": updates,
            "peak_rss_mib": peak_rss_mib(server.pid),
            # CPU seconds per 1,000 node updates: the Global's, and the agents' (this process)
            "sync_global_cpu_k": (cpu_synced[0] - cpu_before[0])
            / args.clusters
            / args.nodes
            * 1000,
            "sync_agents_cpu_k": (cpu_synced[1] - cpu_before[1])
            / args.clusters
            / args.nodes
            * 1000,
            "delta_global_cpu_k": (cpu_end[0] - cpu_synced[0]) / updates * 1000,
            "delta_agents_cpu_k": (cpu_end[1] - cpu_synced[1]) / updates * 1000,
        }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clusters", type=int, default=20)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--seconds", type=float, default=10.0, help="how long to drive deltas")
    parser.add_argument("--batch", type=int, default=500, help="node updates per cluster per delta")
    parser.add_argument("--database-url", default=None, help="default: a fresh SQLite file")
    args = parser.parse_args()
    result = asyncio.run(run(args))
    db = (args.database_url or "sqlite").split(":")[0]
    print(
        f"{db}: {args.clusters} clusters x {args.nodes} nodes: full sync {result['full_sync_s']:.1f} s; "
        f"deltas: {result['updates_per_s']:,.0f} node updates/s ({result['updates']:,} in {args.seconds:g} s, "
        f"batches of {args.batch} per cluster); Global peak RSS {result['peak_rss_mib']:.0f} MiB\n"
        f"CPU s per 1,000 node updates: full sync Global {result['sync_global_cpu_k']:.4f}, "
        f"agents {result['sync_agents_cpu_k']:.4f}; deltas Global {result['delta_global_cpu_k']:.4f}, "
        f"agents {result['delta_agents_cpu_k']:.4f}"
    )


if __name__ == "__main__":
    main()
