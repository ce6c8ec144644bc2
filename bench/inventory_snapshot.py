"""How long the Global takes to replace a 5,000-node cluster's inventory over REST.

    .venv/bin/python bench/inventory_snapshot.py --database-url sqlite+aiosqlite:///bench.db
    .venv/bin/python bench/inventory_snapshot.py --database-url postgresql+asyncpg://postgres@127.0.0.1/bench

The app runs in-process (httpx ASGI transport, no socket), so the figure is request parsing,
validation, the replace-in-one-transaction and the per-domain aggregation.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import httpx

from volcano_global.app import create_app
from volcano_global.settings import Settings

TOKEN = "vg_bench"


def snapshot(tors: int, nodes_per_tor: int) -> dict[str, object]:
    domains = [{"name": "spine", "tier": 2}]
    nodes = []
    for t in range(tors):
        domains.append({"name": f"tor{t}", "tier": 1, "parent": "spine"})
        nodes.extend(
            {"name": f"n{t}-{n}", "gpuModel": "H100", "gpuAllocatable": 8, "domain": f"tor{t}"}
            for n in range(nodes_per_tor)
        )
    return {"domains": domains, "nodes": nodes}


async def main(database_url: str, repeats: int, tors: int, nodes_per_tor: int) -> None:
    app = create_app(Settings(database_url=database_url, admin_token=TOKEN, grpc_port=0))
    body = snapshot(tors, nodes_per_tor)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with httpx.AsyncClient(
            transport=transport, base_url="http://b", headers=headers, timeout=300
        ) as api:
            await api.delete("/api/v1/clusters/bench")
            await api.post("/api/v1/clusters", json={"name": "bench"})
            times = []
            for _ in range(repeats):
                start = time.perf_counter()
                response = await api.put("/api/v1/clusters/bench/inventory", json=body)
                times.append(time.perf_counter() - start)
                response.raise_for_status()
            start = time.perf_counter()
            (await api.get("/api/v1/clusters/bench/topology")).raise_for_status()
            topology = time.perf_counter() - start
            await api.delete("/api/v1/clusters/bench")
    print(f"database: {database_url.split(':')[0]}")
    print(f"snapshot: {len(body['nodes'])} nodes, {len(body['domains'])} domains")  # type: ignore[arg-type]
    print(
        f"replace inventory: median {statistics.median(times):.3f} s, "
        f"max {max(times):.3f} s over {repeats} runs"
    )
    print(f"read topology tree: {topology:.3f} s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--database-url", default="sqlite+aiosqlite:///vglobal-data/bench.db")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--tors", type=int, default=625)
    parser.add_argument("--nodes-per-tor", type=int, default=8)
    args = parser.parse_args()
    asyncio.run(main(args.database_url, args.repeats, args.tors, args.nodes_per_tor))
