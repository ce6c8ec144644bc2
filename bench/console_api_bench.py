"""The console's API calls at fleet scale, in-process (no browser, no HTTP): what listing the
clusters and a cluster's topology levels cost the server at 100 clusters of 5,000 nodes.

    .venv/bin/python bench/console_api_bench.py --database-url sqlite+aiosqlite:////tmp/api.db
    .venv/bin/python bench/console_api_bench.py --database-url postgresql+asyncpg://postgres@127.0.0.1/api_bench

The fleet is `console_bench.py`'s (REST snapshots, 25 spines over 625 ToRs of 8 nodes), seeded
once: a database that already holds the clusters is measured as it is. Each call runs
`--runs` times; printed: the median wall time and the median CPU time of this process per
call (the app, the driver; Postgres's own work is in its server's processes), and the load
average. `count query` is the statement the cluster list ran per request before it read the
counts kept on the cluster rows (issue 35), timed in the same run for the ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable

from console_bench import inventory
from in_process import admin_client, started_app
from sqlalchemy import case, func, select

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from volcano_global.db.engine import transaction
from volcano_global.db.models import Cluster, Node

TOKEN = "console-api-bench-admin"


async def seed(api, clusters: int, nodes: int) -> None:  # type: ignore[no-untyped-def]
    have = len((await api.get("/api/v1/clusters")).json()["items"])
    for i in range(have, clusters):
        name = f"c{i:03d}"
        (await api.post("/api/v1/clusters", json={"name": name})).raise_for_status()
        body = inventory(name, nodes)
        (await api.put(f"/api/v1/clusters/{name}/inventory", json=body)).raise_for_status()


async def per_call(runs: int, call: Callable[[], Awaitable[object]]) -> tuple[float, float]:
    """Median wall and CPU milliseconds of `call` (one warm-up run first)."""
    await call()
    walls, cpus = [], []
    for _ in range(runs):
        wall, cpu = time.perf_counter(), time.process_time()
        await call()
        cpus.append((time.process_time() - cpu) * 1000)
        walls.append((time.perf_counter() - wall) * 1000)
    return statistics.median(walls), statistics.median(cpus)


async def run(args: argparse.Namespace) -> None:
    async with started_app(args.database_url, TOKEN) as app, admin_client(app, TOKEN) as api:
        started = time.perf_counter()
        await seed(api, args.clusters, args.nodes)
        print(f"{args.database_url.split(':')[0]}: {args.clusters} clusters x {args.nodes:,} "
              f"nodes (seeding {time.perf_counter() - started:.0f} s)")  # fmt: skip

        async def get(url: str) -> object:
            response = await api.get(url)
            response.raise_for_status()
            return response.json()

        async def count_query() -> object:
            async with transaction(app.state.sessions) as session:
                ids = list((await session.execute(select(Cluster.id))).scalars())
                rows = await session.execute(
                    select(Node.cluster_id, func.count(), func.sum(case((Node.ready, 1), else_=0)))
                    .where(Node.cluster_id.in_(ids))
                    .group_by(Node.cluster_id)
                )
                return rows.all()

        cluster = f"c{args.clusters // 2:03d}"
        spines = -(-args.nodes // (8 * 25))
        spine = f"{cluster}-spine{spines // 2:02d}"
        calls = {
            "GET /clusters (all)": lambda: get("/api/v1/clusters"),
            "GET /clusters?limit=20": lambda: get("/api/v1/clusters?limit=20"),
            "count query (before)": count_query,
            "topology?top=true": lambda: get(f"/api/v1/clusters/{cluster}/topology?top=true"),
            "topology?parent=spine": lambda: get(
                f"/api/v1/clusters/{cluster}/topology?parent={spine}"
            ),
            "topology (whole tree)": lambda: get(f"/api/v1/clusters/{cluster}/topology"),
        }
        load = os.getloadavg()[0]
        results = {name: await per_call(args.runs, call) for name, call in calls.items()}
    print(f"median of {args.runs} (wall ms / CPU ms of this process); load average "
          f"{load:.1f} before, {os.getloadavg()[0]:.1f} after, {os.cpu_count()} cores")  # fmt: skip
    for name, (wall, cpu) in results.items():
        print(f"  {name:28s} {wall:8.1f} {cpu:8.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--clusters", type=int, default=100)
    parser.add_argument("--nodes", type=int, default=5000, help="nodes per cluster")
    parser.add_argument("--runs", type=int, default=9)
    asyncio.run(run(parser.parse_args()))
