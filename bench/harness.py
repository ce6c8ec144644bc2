"""What the benchmarks share: a real `vglobal server` process on free loopback ports, ready
to take requests, stopped at the end; and waiting until agents' messages are acknowledged."""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from sqlalchemy.engine import make_url

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from core_agent.client import AgentClient  # noqa: E402


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    api: httpx.AsyncClient  # authenticated as admin
    grpc_target: str
    pid: int


@asynccontextmanager
async def global_server(
    database_url: str | None,
    *,
    env: dict[str, str] | None = None,
    cprofile: str | None = None,
    **client: Any,
) -> AsyncIterator[Server]:
    """A server on a fresh SQLite file (or `database_url`), its log in a temp folder.
    `cprofile`: run it under cProfile, its stats written to that file when it stops (its
    main thread only: the event loop, not CP-SAT's threads)."""
    port, grpc_port = free_port(), free_port()
    token = "vg_bench_" + secrets.token_urlsafe(16)
    tmp = Path(tempfile.mkdtemp(prefix="vglobal-bench-"))
    profiled = ["-m", "cProfile", "-o", cprofile] if cprofile else []
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        *profiled,
        "-m",
        "volcano_global.cli.main",
        "server",
        env={
            **os.environ,
            "VGLOBAL_DATABASE_URL": database_url or f"sqlite+aiosqlite:///{tmp}/bench.db",
            "VGLOBAL_ADMIN_TOKEN": token,
            "VGLOBAL_PORT": str(port),
            "VGLOBAL_GRPC_PORT": str(grpc_port),
            "VGLOBAL_LOG_LEVEL": "warning",
            **(env or {}),
        },
        stderr=(tmp / "server.log").open("wb"),
    )
    api = httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{port}",
        headers={"Authorization": f"Bearer {token}"},
        **{"timeout": 30, **client},
    )
    try:
        for _ in range(300):
            try:
                if (await api.get("/readyz")).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.1)
        else:
            raise RuntimeError(f"the server did not get ready; see {tmp}/server.log")
        yield Server(api, f"127.0.0.1:{grpc_port}", process.pid)
    finally:
        await api.aclose()
        process.terminate()
        await asyncio.wait_for(process.wait(), timeout=30)


def process_tree(root: int) -> set[int]:
    """`root` and its live descendants."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat[stat.rindex(")") + 2 :].split()[1])
    tree, grew = {root}, True
    while grew:
        more = {pid for pid, parent in parents.items() if parent in tree} - tree
        tree |= more
        grew = bool(more)
    return tree


def cpu_seconds(name: str | None = None, pids: set[int] | None = None) -> dict[int, float]:
    """User+system CPU seconds used so far by each live process named `name` (as in
    /proc/PID/comm) or with the given ids. Compare per process id: a process that ended in
    between is missing from the later reading (its time since the first is not counted)."""
    used = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or (pids is not None and int(entry.name) not in pids):
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # ended meanwhile
        comm, fields = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :]
        if name is not None and comm != name:
            continue
        utime, stime = fields.split()[11:13]
        used[int(entry.name)] = (int(utime) + int(stime)) / tick
    return used


def machine_busy_seconds() -> float:
    """CPU seconds all cores of the machine have spent busy so far (every process, the kernel
    too: /proc/stat, all but idle and iowait)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


async def wait_acked(
    clients: list[AgentClient], within: float = 600, *, upto: list[int] | None = None
) -> None:
    """Until every client's messages are acknowledged (with `upto`: up to sequence `upto[i]`)
    and each has sent one at least."""
    deadline = time.monotonic() + within
    wanted = upto or [None] * len(clients)
    while any(
        c.acked < (c.seq if seq is None else seq) or c.seq == 0
        for c, seq in zip(clients, wanted, strict=True)
    ):
        if time.monotonic() > deadline:
            raise TimeoutError("agents not acknowledged in time")
        await asyncio.sleep(0.01)


@asynccontextmanager
async def backends(database_url: str | None) -> AsyncIterator[Callable[[], Awaitable[set[int]]]]:
    """A function listing the process ids of the Postgres backends serving the bench's
    database (none on SQLite). Postgres must run on this machine for their CPU to be read."""
    if not (database_url or "").startswith("postgresql"):

        async def none() -> set[int]:
            return set()

        yield none
        return
    url = make_url(database_url).set(drivername="postgresql")
    connection = await asyncpg.connect(url.render_as_string(hide_password=False))

    async def listed() -> set[int]:
        rows = await connection.fetch(
            "SELECT pid FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return {row["pid"] for row in rows}

    try:
        yield listed
    finally:
        await connection.close()
