"""The cost of idle watches of the Kubernetes-compatible API (`kubectl get vcjob -w`) on the
server: memory (RSS) and CPU of a real `vglobal server` process with 0, 1, 100 and 1,000 open
watches on the Volcano Jobs, none of them seeing a change, and how long one change takes to
reach every open watch.

    .venv/bin/python bench/kubectl_watch_bench.py                     # SQLite, 20 s per step
    .venv/bin/python bench/kubectl_watch_bench.py --database-url postgresql+asyncpg://...

The watches come from this process (httpx, one connection each), so the server's figures are
its own. Every watch shares the server's one change feed (services/kube/feed.py): its reads
cost the same for 1 watch as for 1,000; what a watch adds is its connection, its task and its
inbox.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import cpu_seconds, global_server

JOBS = "/k8s/apis/batch.volcano.sh/v1alpha1/namespaces/bench/jobs"


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def job(name: str) -> dict[str, object]:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "bench", "labels": {"bench": "yes"}},
        "spec": {
            "tasks": [
                {
                    "name": "worker",
                    "replicas": 2,
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "c",
                                    "image": "trainer:1",
                                    "resources": {"limits": {"nvidia.com/gpu": "8"}},
                                }
                            ]
                        }
                    },
                }
            ]
        },
    }


async def measure(pid: int, seconds: float) -> tuple[float, float]:
    """RSS at the end (MiB) and CPU used meanwhile (seconds) by the server process."""
    before = cpu_seconds(pids={pid})[pid]
    await asyncio.sleep(seconds)  # the watches stay open and idle: their cost at rest
    return rss_mib(pid), cpu_seconds(pids={pid})[pid] - before


async def open_watches(
    stack: AsyncExitStack, client: httpx.AsyncClient, count: int, version: str
) -> list[httpx.Response]:
    async def one() -> httpx.Response:
        return await stack.enter_async_context(
            client.stream("GET", JOBS, params={"watch": "true", "resourceVersion": version})
        )

    return list(await asyncio.gather(*(one() for _ in range(count))))


async def next_event(lines: AsyncIterator[str]) -> float:
    """When the watch's next event arrived."""
    async for line in lines:
        if line:
            json.loads(line)
            return time.perf_counter()
    raise RuntimeError("the watch ended without an event")


async def run(database_url: str | None, seconds: float, counts: list[int]) -> None:
    # One token opens every watch here: lift the per-token and total limits above the counts.
    lifted = {"VGLOBAL_KUBE__WATCHES_PER_TOKEN": "100000", "VGLOBAL_KUBE__WATCHES_TOTAL": "100000"}
    async with global_server(database_url, env=lifted) as server:
        for index in range(50):
            created = await server.api.post(JOBS, json=job(f"job-{index}"))
            created.raise_for_status()
        version = (await server.api.get(JOBS)).json()["metadata"]["resourceVersion"]
        rss0, cpu0 = await measure(server.pid, seconds)
        print(f"0 watches: RSS {rss0:.1f} MiB, CPU {cpu0 / seconds * 100:.2f}% of a core")
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=0)
        for count in counts:
            async with (
                httpx.AsyncClient(
                    base_url=str(server.api.base_url),
                    headers=dict(server.api.headers),
                    limits=limits,
                    timeout=None,
                ) as client,
                AsyncExitStack() as stack,
            ):
                watches = [
                    w.aiter_lines() for w in await open_watches(stack, client, count, version)
                ]
                # One change first: a watch hands on changes only after its catch-up read, so
                # once every watch has it, all are established and the rest is idle.
                started = time.perf_counter()
                changed = await server.api.patch(
                    f"{JOBS}/job-0",
                    content=json.dumps({"metadata": {"labels": {"n": str(count)}}}),
                    headers={"Content-Type": "application/merge-patch+json"},
                )
                changed.raise_for_status()
                arrivals = await asyncio.gather(*(next_event(w) for w in watches))
                reached = (max(arrivals) - started) * 1000
                rss, cpu = await measure(server.pid, seconds)
                per_100 = (rss - rss0) / count * 100
                print(
                    f"{count} watches: RSS {rss:.1f} MiB (+{rss - rss0:.1f}, {per_100:.2f} MiB "
                    f"per 100), CPU {cpu / seconds * 100:.2f}% of a core "
                    f"(+{(cpu - cpu0) / seconds * 100:.2f} points); one change reached them "
                    f"all in {reached:.0f} ms (the first in "
                    f"{(min(arrivals) - started) * 1000:.0f} ms), catch-up included"
                )
                # A second change, the watches established: the feed's period plus fan-out.
                started = time.perf_counter()
                changed = await server.api.patch(
                    f"{JOBS}/job-1",
                    content=json.dumps({"metadata": {"labels": {"n": str(count)}}}),
                    headers={"Content-Type": "application/merge-patch+json"},
                )
                changed.raise_for_status()
                arrivals = await asyncio.gather(*(next_event(w) for w in watches))
                print(
                    f"  a change to {count} established watches reached them all in "
                    f"{(max(arrivals) - started) * 1000:.0f} ms (the first in "
                    f"{(min(arrivals) - started) * 1000:.0f} ms; the feed reads every 0.5 s)"
                )
                version = changed.json()["metadata"]["resourceVersion"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--seconds", type=float, default=20.0, help="Idle time per step")
    parser.add_argument("--counts", default="1,100,1000", help="Watch counts to measure")
    args = parser.parse_args()
    counts = [int(c) for c in args.counts.split(",")]
    asyncio.run(run(args.database_url, args.seconds, counts))


if __name__ == "__main__":
    main()
