"""The open-loop request load of bench/load_bench.py: job submissions and reads sent on a fixed
schedule whatever the answers, with each kind's latencies and errors."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import time

import aiohttp
from harness import Server


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
    calls = _Calls(apis)
    pending: set[asyncio.Task[None]] = set()
    begin = time.perf_counter()
    submitted = read = 0
    while (now := time.perf_counter() - begin) < seconds:
        while submitted < now * rate:
            pending.add(
                asyncio.create_task(
                    calls.call(
                        "submit", "POST", "/api/v1/jobs", json=job(first + submitted, job_seconds)
                    )
                )
            )
            submitted += 1
        while read < now * reads:
            if read % 2 == 0 or not calls.uids:
                task = calls.call("list", "GET", "/api/v1/jobs", params={"limit": 20})
            else:
                task = calls.call("get", "GET", f"/api/v1/jobs/{random.choice(calls.uids)}")
            pending.add(asyncio.create_task(task))
            read += 1
        pending = {t for t in pending if not t.done()}
        await asyncio.sleep(0.002)
    await asyncio.gather(*pending)
    return calls.summary(time.perf_counter() - begin)


class _Calls:
    """The requests sent so far, to the servers in turn: each kind's latencies and errors, the
    errors' causes, the uids of the jobs submitted."""

    def __init__(self, apis: list[aiohttp.ClientSession]) -> None:
        self.apis = apis
        self.latencies: dict[str, list[float]] = {"submit": [], "list": [], "get": []}
        self.errors: dict[str, int] = {k: 0 for k in self.latencies}
        self.causes: dict[str, int] = {}  # "503", "ReadTimeout", ...
        self.uids: list[str] = []
        # Each kind goes to the replicas in turn on its own, so every kind meets every replica:
        # the driver interleaves the kinds in a fixed pattern, which one shared turn would
        # line up with the replicas.
        self.turns = {kind: itertools.count() for kind in self.latencies}
        self.by_replica: list[list[float]] = [[] for _ in apis]  # every kind's latencies

    async def call(self, kind: str, method: str, path: str, **kwargs: object) -> None:
        started = time.perf_counter()
        replica = next(self.turns[kind]) % len(self.apis)
        api = self.apis[replica]
        try:
            async with api.request(method, path, **kwargs) as response:  # type: ignore[arg-type]
                ok = response.status < 400
                if ok and kind == "submit":
                    self.uids.append((await response.json())["uid"])
                else:
                    await response.read()
                cause = str(response.status)
        except (aiohttp.ClientError, TimeoutError) as exc:
            ok, cause = False, type(exc).__name__
        if not ok:
            self.causes[f"{kind} {cause}"] = self.causes.get(f"{kind} {cause}", 0) + 1
        took = time.perf_counter() - started
        self.latencies[kind].append(took)
        self.by_replica[replica].append(took)
        if not ok:
            self.errors[kind] += 1

    def summary(self, elapsed: float) -> dict:
        replicas = [
            {
                "requests": len(values),
                "p50_ms": 1000 * percentile(values, 0.5),
                "p99_ms": 1000 * percentile(values, 0.99),
            }
            for values in self.by_replica
        ]
        return {"error_causes": self.causes, "by_replica": replicas} | {
            kind: {
                "requests": len(values),
                "per_s": len(values) / elapsed,
                "p50_ms": 1000 * percentile(values, 0.5),
                "p95_ms": 1000 * percentile(values, 0.95),
                "p99_ms": 1000 * percentile(values, 0.99),
                "errors": self.errors[kind],
            }
            for kind, values in self.latencies.items()
        }
