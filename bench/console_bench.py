"""The console at fleet scale, measured in the browser (issue 35: overview and job list
<= 1 s at 100 clusters and 10,000 jobs).

    .venv/bin/python bench/console_bench.py                      # 100 x 5,000 nodes, 10,000 jobs
    .venv/bin/python bench/console_bench.py --database-url postgresql+asyncpg://postgres@127.0.0.1/console_bench
    .venv/bin/python bench/console_bench.py --clusters 10 --nodes 500 --jobs 1000   # a quick look

A real `vglobal server` (scheduling off, so the jobs stay waiting and nothing else runs) gets
`--clusters` clusters of `--nodes` 8-GPU nodes (REST inventory snapshots: 25 spines over ToRs
of 8 nodes, 625 ToRs at 5,000 nodes), `--jobs` jobs over 10 queues (REST submissions) and a
week of history samples (straight into the database: what the loop would have sampled every
30 s). Headless Chromium (Playwright, Debian's build) then loads each page `--loads` times,
each in a fresh tab with the static files cached (a returning user), and reports the time from
navigation start to the page drawn (`performance.now()` when its data is in the DOM): median,
max and the first (cold) load.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from typing import Any

from harness import REPO, global_server
from playwright.async_api import Browser, BrowserContext, async_playwright

sys.path.insert(0, str(REPO))

from tests.console.conftest import CHROMIUM, CHROMIUM_ARGS
from tests.factories import job_document
from volcano_global.db.base import utcnow
from volcano_global.db.engine import create_engine, create_session_factory, transaction
from volcano_global.db.models import RoundSample
from volcano_global.services.scheduling.history import KEPT_FOR, SAMPLE_EVERY_S

QUEUES = 10
NODES_PER_TOR = 8
TORS_PER_SPINE = 25


def pages(clusters: int, jobs: int) -> dict[str, tuple[str, str]]:
    """Page -> (hash route, what must be in the DOM for it to count as drawn)."""
    job, cluster = jobs // 2, f"c{clusters // 2:03d}"
    queue, text = f"q{job % QUEUES}", f"{job:05d}"
    return {
        "overview": ("#/", "[data-testid=clusters] tr[data-testid^=cluster-]"),
        "jobs": ("#/jobs", "[data-testid=jobs] tr[data-testid^=job-]"),
        f"jobs search (queue {queue}, name {text})": (
            f"#/jobs?queue={queue}&text={text}",
            f"[data-testid=job-job-{text}]",
        ),
        "clusters": ("#/clusters", "[data-testid=clusters] tr[data-testid^=cluster-]"),
        f"cluster {cluster} (tree collapsed)": (f"#/clusters/{cluster}", "[data-testid^=toggle-]"),
        "history (7 days)": ("#/history?range=7d", "[data-testid=history-allocation] path.line"),
    }


def inventory(cluster: str, nodes: int) -> dict[str, Any]:
    tors = -(-nodes // NODES_PER_TOR)
    domains: list[dict[str, Any]] = []
    node_rows = []
    for t in range(tors):
        spine = f"{cluster}-spine{t // TORS_PER_SPINE:02d}"
        if t % TORS_PER_SPINE == 0:
            domains.append({"name": spine, "tier": 2, "tierName": "spine"})
        tor = f"{cluster}-tor{t:03d}"
        domains.append({"name": tor, "tier": 1, "tierName": "tor", "parent": spine})
        for n in range(min(NODES_PER_TOR, nodes - t * NODES_PER_TOR)):
            node_rows.append(
                {
                    "name": f"{tor}-n{n}",
                    "gpuModel": "H100",
                    "gpuAllocatable": 8,
                    "gpuUsed": 8 if (t + n) % 3 == 0 else 0,
                    "domain": tor,
                }
            )
    return {"domains": domains, "nodes": node_rows}


async def seed_fleet(api: Any, clusters: int, nodes: int) -> None:
    async def one(i: int) -> None:
        name = f"c{i:03d}"
        (await api.post("/api/v1/clusters", json={"name": name})).raise_for_status()
        (
            await api.put(f"/api/v1/clusters/{name}/inventory", json=inventory(name, nodes))
        ).raise_for_status()

    for start in range(0, clusters, 2):  # two at a time: two cores
        await asyncio.gather(*(one(i) for i in range(start, min(start + 2, clusters))))


async def seed_jobs(api: Any, jobs: int) -> None:
    for q in range(QUEUES):
        (await api.post("/api/v1/queues", json={"name": f"q{q}", "weight": 1})).raise_for_status()

    async def one(i: int) -> None:
        queue = f"q{i % QUEUES}"
        document = job_document(f"job-{i:05d}", queue=queue, replicas=1 + i % 8)
        document["metadata"]["namespace"] = queue  # a queue's own namespace (tenancy rules)
        (await api.post("/api/v1/jobs", json=document)).raise_for_status()

    for start in range(0, jobs, 8):
        await asyncio.gather(*(one(i) for i in range(start, min(start + 8, jobs))))


async def seed_history(database_url: str, clusters: int, nodes: int) -> int:
    """A week of samples, one every SAMPLE_EVERY_S: the most the table ever holds."""
    engine = create_engine(database_url)
    now, total = utcnow(), clusters * nodes * 8
    count = int(KEPT_FOR.total_seconds() // SAMPLE_EVERY_S)
    async with transaction(create_session_factory(engine)) as session:
        session.add_all(
            RoundSample(
                taken_at=now - timedelta(seconds=k * SAMPLE_EVERY_S),
                gpus_total=total,
                gpus_allocated=int(total * (0.6 + 0.3 * ((k // 120) % 4) / 3)),
                waiting_jobs=5000 + (k * 37) % 5000,
                waiting_gpus=40_000,
                median_wait_seconds=600 + (k % 240) * 10,
                oldest_wait_seconds=3600 + (k % 2880) * 20,
            )
            for k in range(count)
        )
    await engine.dispose()
    return count


async def load_once(context: BrowserContext, url: str, ready: str) -> float:
    """Seconds from navigation start to `ready` in the DOM, in a fresh tab."""
    page = await context.new_page()
    page.on("pageerror", lambda error: print(f"script error on {url}: {error}", file=sys.stderr))
    try:
        await page.goto(url)
        handle = await page.wait_for_function(
            "(sel) => document.querySelector(sel) ? performance.now() : null",
            arg=ready,
            polling="raf",
            timeout=60_000,
        )  # a page that never draws fails the run (Playwright names the url)
        return float(await handle.json_value()) / 1000
    finally:
        await page.close()


async def measure(
    browser: Browser, base: str, token: str, args: argparse.Namespace
) -> dict[str, list[float]]:
    context = await browser.new_context(viewport={"width": 1400, "height": 1000})
    await context.add_init_script(f"sessionStorage.setItem('vglobal-token', {token!r})")
    results: dict[str, list[float]] = {}
    try:
        for name, (route, ready) in pages(args.clusters, args.jobs).items():
            url = f"{base}/{route}"
            results[name] = [await load_once(context, url, ready) for _ in range(args.loads)]
    finally:
        await context.close()
    return results


async def run(args: argparse.Namespace) -> None:
    env = {"VGLOBAL_SCHEDULING__ENABLED": "false", "VGLOBAL_RATE_LIMIT__ENABLED": "false"}
    database_url = args.database_url or f"sqlite+aiosqlite:///{tempfile.mkdtemp()}/console.db"
    async with global_server(database_url, env=env, timeout=600) as server:
        api = server.api
        start = time.perf_counter()
        await seed_fleet(api, args.clusters, args.nodes)
        fleet_s = time.perf_counter() - start
        start = time.perf_counter()
        await seed_jobs(api, args.jobs)
        jobs_s = time.perf_counter() - start
        samples = await seed_history(database_url, args.clusters, args.nodes)
        print(f"database: {database_url.split(':')[0]}")
        print(f"seeded {args.clusters} clusters x {args.nodes:,} nodes in {fleet_s:.0f} s, "
              f"{args.jobs:,} jobs in {jobs_s:.0f} s, {samples:,} history samples")  # fmt: skip
        token = api.headers["Authorization"].removeprefix("Bearer ")
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            load = os.getloadavg()[0]
            try:
                results = await measure(browser, str(api.base_url).rstrip("/"), token, args)
            finally:
                await browser.close()
    # The machine's other work shows in these times: say how busy it was.
    busy = f"load average {load:.1f} before, {os.getloadavg()[0]:.1f} after, {os.cpu_count()} cores"
    print(f"time to a drawn page, {args.loads} loads each (median / max / first); {busy}:")
    for name, times in results.items():
        print(
            f"  {name:36s} {statistics.median(times):6.3f} s {max(times):6.3f} s {times[0]:6.3f} s"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--database-url", default=None, help="default: a fresh SQLite file")
    parser.add_argument("--clusters", type=int, default=100)
    parser.add_argument("--nodes", type=int, default=5000, help="nodes per cluster")
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--loads", type=int, default=7, help="loads of each page")
    asyncio.run(run(parser.parse_args()))
