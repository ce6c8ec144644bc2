"""Two Global replicas on one Postgres, killed by SIGKILL again and again at the worst moments
(failpoints): while a scheduling round's placements are written but not committed, right after
an assignment went out on an agent's stream, and while an agent's status report is applied but
not committed. Agents reach the replicas through one gRPC target naming both (as behind a
Service); the client submits to whichever answers. Afterwards every invariant holds: no accepted
job lost, none run twice, nothing left reserved."""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

from core_agent.simulated.cluster import ClusterSpec
from tests.agents import run_agent
from tests.conftest import ADMIN_TOKEN, create_postgres_database, drop_postgres_database
from tests.factories import REPLY_S, job_document, split_annotations
from tests.faults.invariants import RecordingCluster, check_invariants, write_report
from tests.server_process import ServerProcess

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
POINTS = ("round-commit", "dispatch-sent", "report-commit")
KILLS = 6  # two at each failpoint
# Waits bounded by progress, not by the whole run: a replica's start costs ~2.5 s of CPU, 40 s of
# wall time at a load of 16 on two cores, and each kill takes up to three starts and a stop.
STALLED_S = 300  # no kill, or no job finished, for this long: the run is stuck
# Jobs waiting at most while the kills go on: the slower the host, the longer the kills take, and
# the jobs submitted meanwhile grew the drain after them without bound (over 20 min at load 20).
BACKLOG = 10
SPEC = ClusterSpec.model_validate(
    {
        "nodeGroups": [{"count": 8, "gpusPerNode": 8, "gpuModel": "H100"}],
        "topology": {"tiers": [{"name": "tor", "size": 4}]},
    }
)


def document(i: int) -> dict[str, Any]:
    """Every third job needs 96 GPUs (more than one 64-GPU cluster: split); the others 16."""
    if i % 3 == 0:
        # 3 s at the agents' time scale: longer than a kill delays one cluster's assignment or
        # report, else a share ends before its peer starts and the gang is (rightly) broken
        # and requeued again and again.
        doc = job_document(f"split-{i:03d}", replicas=12, runningEstimate="30s")
        doc["metadata"]["annotations"] = split_annotations(4, crossing_gbps=50)
        return doc
    return job_document(f"whole-{i:03d}", replicas=2, runningEstimate="10s")


class Replicas:
    """The two server processes. One at a time is armed with a failpoint and made the active
    one (leader and agents' streams) by a rolling restart of the other; when the failpoint
    kills it, the other takes over, and the dead one comes back armed with the next failpoint."""

    def __init__(self, url: str, tmp: Path) -> None:
        self.servers = [ServerProcess(url, tmp, scheduling=True) for _ in range(2)]
        for server in self.servers:
            server.env.update(
                {
                    "VGLOBAL_AGENTS__HEARTBEAT_INTERVAL_S": "1",
                    "VGLOBAL_AGENTS__OUTBOX_POLL_S": "0.1",
                    "VGLOBAL_LOG_LEVEL": "warning",
                }
            )
        self.kills: Counter[str] = Counter()
        self.rolling_restarts = 0
        self.rng = random.Random(7)

    @property
    def grpc_target(self) -> str:
        ports = [s.env["VGLOBAL_GRPC_PORT"] for s in self.servers]
        return "ipv4:" + ",".join(f"127.0.0.1:{p}" for p in ports)

    async def _start(self, server: ServerProcess, point: str | None) -> None:
        if point is None:
            server.env.pop("VGLOBAL_FAILPOINTS", None)
        else:
            server.env["VGLOBAL_FAILPOINTS"] = f"{point}={self.rng.randint(1, 2)}"
        try:
            await asyncio.to_thread(server.start)
        except AssertionError:
            # An armed replica can reach its failpoint before it answers /readyz (agents
            # reconnect to its gRPC port at once): `watch` finds it dead and checks it died
            # at the failpoint, like any other kill.
            if point is None or server.proc is None or server.proc.poll() is None:
                raise

    async def start(self) -> None:
        await self._start(self.servers[0], POINTS[0])  # first: it leads and takes the streams
        await self._start(self.servers[1], None)

    def _failpoints_hit(self, server: ServerProcess) -> list[str]:
        lines = server.log.read_text().splitlines()
        return [line.split()[1].rstrip(":") for line in lines if line.startswith("FAILPOINT ")]

    async def watch(self, done: asyncio.Event) -> None:
        """Wait for the armed replica to die; check it died at its failpoint; bring it back
        armed with the next failpoint and hand it the work."""
        while not done.is_set():
            dead = [s for s in self.servers if s.proc is not None and s.proc.poll() is not None]
            if not dead:
                await asyncio.sleep(0.1)
                continue
            assert len(dead) == 1, "both replicas died"
            victim = dead[0]
            survivor = next(s for s in self.servers if s is not victim)
            hit = self._failpoints_hit(victim)
            assert len(hit) + len(self._failpoints_hit(survivor)) == sum(self.kills.values()) + 1, (
                f"replica died without a failpoint:\n{victim.log.read_text()[-3000:]}"
            )
            self.kills[hit[-1]] += 1
            killed = sum(self.kills.values())
            point = POINTS[killed % len(POINTS)] if killed < KILLS else None
            await self._start(victim, point)
            if point is not None:  # make the armed replica the active one
                await asyncio.to_thread(survivor.stop)
                await self._start(survivor, None)
                self.rolling_restarts += 1

    def stop(self) -> None:
        for server in self.servers:
            server.stop()


class Progress:
    """Fails when a count has not grown for STALLED_S."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.best: int | None = None
        self.since = time.monotonic()

    def check(self, count: int, message: str) -> None:
        if self.best is None or count > self.best:
            self.best, self.since = count, time.monotonic()
        stalled = time.monotonic() - self.since
        assert stalled < STALLED_S, f"no {self.what} for {stalled:.0f} s: {message}"


async def call(method: str, replicas: Replicas, path: str, **kwargs: Any) -> httpx.Response:
    """The request on whichever replica answers (a killed one is being restarted)."""
    # Both may be starting: the armed one, killed while the other restarts.
    deadline = time.monotonic() + STALLED_S
    while True:
        for server in replicas.servers:
            try:
                async with httpx.AsyncClient(
                    timeout=REPLY_S, base_url=server.url, headers=ADMIN
                ) as api:
                    response = await api.request(method, path, timeout=10, **kwargs)
                if response.status_code < 500:
                    return response
            except httpx.HTTPError:
                pass
        assert time.monotonic() < deadline, f"no replica answered {method} {path}"
        await asyncio.sleep(0.2)


async def waiting(replicas: Replicas) -> int:
    """How many jobs are Pending (up to BACKLOG)."""
    params = {"state": "Pending", "limit": BACKLOG}
    return len((await call("GET", replicas, "/api/v1/jobs", params=params)).json()["items"])


async def submit(replicas: Replicas, doc: dict[str, Any]) -> str:
    """Submit until an answer; a 409 means an earlier attempt was stored (its answer lost)."""
    response = await call("POST", replicas, "/api/v1/jobs", json=doc)
    if response.status_code == 409:
        name = doc["metadata"]["name"]
        listed = await call("GET", replicas, "/api/v1/jobs", params={"name": name})
        return str(listed.json()["items"][0]["uid"])
    assert response.status_code == 201, response.text
    return str(response.json()["uid"])


@pytest.mark.timeout(1200)  # under load: 290 s at a load of 8-16 (the default 300 s failed it)
async def test_replicas_killed_at_commit_dispatch_and_report(
    tmp_path: Path, fresh_database_name: str
) -> None:
    url = await create_postgres_database(fresh_database_name)
    replicas = Replicas(url, tmp_path)
    clusters: dict[str, RecordingCluster] = {}
    stop, done = asyncio.Event(), asyncio.Event()
    tasks: list[asyncio.Task[None]] = []
    started = time.monotonic()
    try:
        await replicas.start()
        for name in ("east", "west", "north"):
            token = (await call("POST", replicas, "/api/v1/clusters", json={"name": name})).json()[
                "agentToken"
            ]
            clusters[name] = RecordingCluster.from_spec(name, SPEC)
            clusters[name].time_scale = 0.1  # a 10 s job runs 1 s
            target = replicas.grpc_target
            tasks.append(run_agent(name, clusters[name], target=target, token=token, stop=stop))
        for a, b in (("east", "west"), ("west", "north"), ("east", "north")):
            body = {"clusterA": a, "clusterB": b, "capacityGbps": 400}
            assert (await call("POST", replicas, "/api/v1/links", json=body)).status_code == 201
        watcher = asyncio.create_task(replicas.watch(done))

        accepted: dict[str, str] = {}
        i = 0
        progress = Progress("a kill")
        while sum(replicas.kills.values()) < KILLS or i < 30:
            progress.check(sum(replicas.kills.values()), f"only {dict(replicas.kills)} kills")
            if watcher.done():
                watcher.result()  # its failure
            if await waiting(replicas) < BACKLOG:
                doc = document(i)
                key = f"{doc['metadata']['namespace']}/{doc['metadata']['name']}"
                accepted[key] = await submit(replicas, doc)
                i += 1
            await asyncio.sleep(0.4)

        async def unfinished() -> list[str]:
            items: list[dict[str, Any]] = []
            params: dict[str, Any] = {"limit": 500}
            while True:  # every page: under load the kills take longer, and more jobs come
                page = (await call("GET", replicas, "/api/v1/jobs", params=params)).json()
                items += page["items"]
                if not page["metadata"].get("continue"):
                    break
                params["continue"] = page["metadata"]["continue"]
            return [
                f"{j['name']} {j['state']} ({j.get('pendingReason')})"
                for j in items
                if j["state"] != "Succeeded"
            ]

        progress = Progress("a job finished")
        while left := await unfinished():
            progress.check(-len(left), f"jobs not finished after the faults: {left}")
            await asyncio.sleep(0.5)
        done.set()
        await watcher
        checked = await check_invariants(url, clusters, accepted=accepted)
        assert replicas.kills == Counter({p: KILLS // len(POINTS) for p in POINTS}), replicas.kills
        write_report(
            "replica-crashes",
            {
                "faults injected (SIGKILL of a replica)": dict(replicas.kills),
                "rolling restarts (SIGTERM, to hand the work to the armed replica)": (
                    replicas.rolling_restarts
                ),
                "jobs submitted": len(accepted),
                "invariants checked": dict(checked.counts),
                "seconds": round(time.monotonic() - started, 1),
            },
        )
    finally:
        done.set()
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        replicas.stop()
        await drop_postgres_database(fresh_database_name)
