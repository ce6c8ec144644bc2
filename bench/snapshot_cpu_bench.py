"""The Global's CPU per 1,000 nodes of an agent's snapshot, in-process: the protocol message
checked (`snapshot_from`) and written (`replace_inventory` in one transaction, as the agent
service does), repeated on one cluster, each stage timed with the process's CPU clock.

    .venv/bin/python bench/snapshot_cpu_bench.py --database-url postgresql+asyncpg://postgres@127.0.0.1/DB
    .venv/bin/python bench/snapshot_cpu_bench.py --repeats 20     # SQLite, a fresh file
    py-spy record -o profile.svg -- .venv/bin/python bench/snapshot_cpu_bench.py --repeats 40

The message is what a simulated agent sends (`SimulatedCluster`, the layout of
agent_sync_bench.py): the figure is the server's side of that benchmark's full sync, without
gRPC and without the other streams.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time

from harness import (
    backends,  # bench/ is on the path when run as a script
    cpu_seconds,
)
from in_process import started_app

from core_agent.simulated.cluster import ClusterSpec, SimulatedCluster
from volcano_global.db.engine import transaction
from volcano_global.grpc.convert import snapshot_from
from volcano_global.services.inventory import clusters as cluster_service
from volcano_global.services.inventory.snapshots import replace_inventory


def message(nodes: int):  # type: ignore[no-untyped-def]
    spec = ClusterSpec.model_validate(
        {
            "nodeGroups": [{"count": nodes, "gpusPerNode": 8, "gpuModel": "H100"}],
            "topology": {"tiers": [{"name": "tor", "size": 8}, {"name": "spine", "size": 25}]},
        }
    )
    return SimulatedCluster.from_spec("bench", spec).current().snapshot(seq=1)


async def run(url: str, nodes: int, repeats: int) -> tuple[list[float], list[float], float]:
    """The CPU seconds of each check and each write in this process, and the Postgres
    backends' CPU seconds over all but the first snapshot (0 on SQLite)."""
    snapshot = message(nodes)
    checks, writes = [], []
    async with started_app(url, "vg_bench") as app, backends(url) as backend_pids:
        sessions = app.state.sessions
        async with transaction(sessions) as session:
            await cluster_service.register_cluster(session, name="bench", description="", labels={})
        database: dict[int, float] = {}
        for n in range(repeats):
            if n == 1:
                database = cpu_seconds(pids=await backend_pids())
            started = time.process_time()
            checked = snapshot_from(snapshot)
            checks.append(time.process_time() - started)
            started = time.process_time()
            async with transaction(sessions) as session:
                cluster = await cluster_service.lock_cluster(session, name="bench")
                await replace_inventory(session, cluster=cluster, snapshot=checked, seq=n + 1)
            writes.append(time.process_time() - started)
        after = cpu_seconds(pids=await backend_pids())
    return checks, writes, sum(cpu - database.get(pid, 0.0) for pid, cpu in after.items())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--database-url", default=None, help="default: a fresh SQLite file")
    args = parser.parse_args()
    if args.repeats < 2:
        parser.error("--repeats must be at least 2 (the first write of each shape is left out)")
    url = args.database_url or f"sqlite+aiosqlite:///{tempfile.mkdtemp()}/bench.db"
    checks, writes, database = asyncio.run(run(url, args.nodes, args.repeats))
    per_k = 1000 / args.nodes
    # the first write of each shape prepares statements: the median of the rest
    check, write = statistics.median(checks[1:]), statistics.median(writes[1:])
    # on SQLite the database's work is this process's (its driver's thread)
    backends = f"; Postgres backends (mean) {database / (args.repeats - 1) * per_k:.4f}"
    print(
        f"{url.split(':')[0]}: snapshot of {args.nodes} nodes, CPU s per 1,000 nodes (median of "
        f"{args.repeats - 1}): check {check * per_k:.4f}, write {write * per_k:.4f}, "
        f"total {(check + write) * per_k:.4f}{backends if url.startswith('postgresql') else ''}"
    )


if __name__ == "__main__":
    main()
