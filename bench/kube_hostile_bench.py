"""A hostile tenant against the lists and watches of the Kubernetes-compatible API (issue 38
items 4-5), measured on a real `vglobal server` process: how long a 60 KB label selector
takes to be answered (and how long a health probe waits meanwhile), the server's memory
(RSS) with watches from resourceVersion 0 whose clients never read, over jobs of about
0.9 MB, and with unlimited lists (`limit=0`) of them, and how many watches one token opens.

    .venv/bin/python bench/kube_hostile_bench.py --jobs 40 --watches 10

The clients of the unread watches are raw sockets with a small receive buffer that send the
request and never read."""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import global_server
from kubectl_watch_bench import rss_mib

JOBS = "/k8s/apis/batch.volcano.sh/v1alpha1/namespaces/bench/jobs"


def big_job(name: str, size: int) -> dict[str, object]:
    """A job whose document is about `size` bytes (environment variables)."""
    env = [{"name": f"V{i}", "value": "x" * 1000} for i in range(size // 1024)]
    container = {
        "name": "trainer",
        "image": "trainer:1",
        "env": env,
        "resources": {"limits": {"nvidia.com/gpu": "1"}},
    }
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "bench"},
        "spec": {
            "tasks": [
                {"name": "w", "replicas": 1, "template": {"spec": {"containers": [container]}}}
            ]
        },
    }


def unread_watch(port: int, token: str) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    request = (
        f"GET {JOBS}?watch=true&resourceVersion=0 HTTP/1.1\r\nHost: bench\r\n"
        f"Authorization: Bearer {token}\r\n\r\n"
    )
    sock.sendall(request.encode())
    return sock


async def peak_rss(pid: int, seconds: float) -> float:
    peak, end = 0.0, time.monotonic() + seconds
    while time.monotonic() < end:
        peak = max(peak, rss_mib(pid))
        await asyncio.sleep(0.1)
    return peak


async def selector(api: httpx.AsyncClient) -> None:
    hostile = "a=" + " " * 60_000 + "!"
    start = time.monotonic()
    answer = asyncio.create_task(api.get(JOBS, params={"labelSelector": hostile}, timeout=120))
    await asyncio.sleep(0.05)
    probe = time.monotonic()
    await api.get("/readyz", timeout=120)
    waited = time.monotonic() - probe
    refused = await answer
    print(
        f"60 KB selector: {refused.status_code} in {time.monotonic() - start:.2f} s "
        f"({refused.json().get('message', '')[:90]!r}); /readyz meanwhile took {waited:.2f} s"
    )


async def watches(pid: int, port: int, token: str, count: int, seconds: float) -> None:
    base = rss_mib(pid)
    socks = [unread_watch(port, token) for _ in range(count)]
    peak = await peak_rss(pid, seconds)
    after = rss_mib(pid)
    closed = 0
    for sock in socks:
        sock.settimeout(5)
        try:
            while sock.recv(1 << 20):
                pass
            closed += 1  # the server ended it (EOF once its data is read)
        except TimeoutError:
            pass
        sock.close()
    print(
        f"{count} unread watches from 0: RSS {base:.0f} -> peak {peak:.0f} MiB, "
        f"{after:.0f} MiB after {seconds:.0f} s; closed by the server: {closed}/{count}"
    )


async def lists(api: httpx.AsyncClient, pid: int, count: int) -> None:
    base = rss_mib(pid)
    sampling = asyncio.create_task(peak_rss(pid, 8))
    answers = await asyncio.gather(
        *(api.get(JOBS, params={"limit": "0"}, timeout=120) for _ in range(count))
    )
    peak = await sampling
    sizes = {len(a.content) for a in answers}
    print(
        f"{count} lists with limit=0 at once: RSS {base:.0f} -> peak {peak:.0f} MiB "
        f"(answers of {max(sizes) / 1e6:.0f} MB, status {sorted({a.status_code for a in answers})})"
    )


async def per_token(api: httpx.AsyncClient, count: int) -> None:
    async def one() -> int:
        async with api.stream("GET", JOBS, params={"watch": "true", "timeoutSeconds": "3"}) as r:
            return r.status_code

    codes = await asyncio.gather(*(one() for _ in range(count)))
    print(f"{count} watches of one token: {codes.count(200)} 200, {codes.count(429)} 429")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=40)
    parser.add_argument("--size", type=int, default=900_000)
    parser.add_argument("--watches", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=40)
    args = parser.parse_args()
    limits = httpx.Limits(max_connections=2000, max_keepalive_connections=2000)
    async with global_server(None, limits=limits) as server:
        api = server.api
        await selector(api)
        for i in range(args.jobs):
            created = await api.post(JOBS, json=big_job(f"big-{i:03d}", args.size), timeout=60)
            assert created.status_code == 201, created.text
        print(f"{args.jobs} jobs of {args.size / 1e6:.1f} MB; RSS {rss_mib(server.pid):.0f} MiB")
        token = api.headers["Authorization"].removeprefix("Bearer ")
        port = int(str(api.base_url).rsplit(":", 1)[1].strip("/"))
        await lists(api, server.pid, 4)
        await watches(server.pid, port, token, args.watches, args.seconds)
        await per_token(api, 100)


if __name__ == "__main__":
    asyncio.run(main())
