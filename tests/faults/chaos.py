"""A chaos soak: two server replicas on one Postgres (reached through a TCP proxy that can cut
every connection), four simulated clusters as agent processes (each reaching both replicas
through proxies of its own, to reset or stall its stream), links between them, a job every
~1.5 s (some must split, some are invalid), and faults drawn from a seeded RNG. Invariants are
checked through the public API only, sampled during the run (`tests/faults/chaos_checks.py`).
Used by the CI test (`test_chaos_soak.py`, a minute of faults) and `bench/chaos_soak.py`."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy.engine import make_url

from tests.conftest import ADMIN_TOKEN
from tests.factories import job_document, split_annotations
from tests.faults.chaos_checks import Figures, sample
from tests.faults.proxy import Proxy
from tests.server_process import VGLOBAL, ServerProcess

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
CLUSTERS = ("c1", "c2", "c3", "c4")
SPEC = """nodeGroups:
  - {count: 8, gpusPerNode: 8, gpuModel: H100}
topology:
  tiers:
    - {name: tor, size: 4}
"""
FAULTS = ("kill-replica", "kill-leader", "kill-agent", "cut-database", "reset-agent", "stall-agent")
TIME_SCALE = 0.05  # a job of 400 s runs 20 s
FINAL_SAMPLES, FINAL_EVERY_S = 3, 5.0  # after settling: stuck means stuck in all of them


@dataclass
class SoakConfig:
    seconds: float = 60.0  # of faults (and submissions)
    seed: int = 1
    faults: tuple[str, ...] = FAULTS
    fault_every_s: float = 6.0  # mean gap between faults
    job_every_s: float = 1.5
    settle_s: float = 45.0  # after the faults stop: then nothing may be stuck
    sample_every_s: float = 1.0


@dataclass
class Agent:
    name: str
    token: str
    proxies: list[Proxy]
    target: str  # the proxies' addresses: gRPC tries the next when one fails
    spec: Path
    log: Path
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        command = [*VGLOBAL, "agent", "--cluster", self.name, "--global", self.target]
        command += ["--source", "simulated", "--spec", str(self.spec)]
        command += ["--time-scale", str(TIME_SCALE)]
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                command,
                env={**os.environ, "VGLOBAL_AGENT_TOKEN": self.token},
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)


@dataclass
class Fleet:
    database_url: str
    tmp: Path
    rng: random.Random
    db_proxy: Proxy = field(init=False)
    replicas: list[ServerProcess] = field(default_factory=list)
    agents: dict[str, Agent] = field(default_factory=dict)
    figures: Figures = field(default_factory=Figures)
    returns: list[tuple[str, datetime]] = field(default_factory=list)  # (cluster, agent back at)
    down: dict[str, asyncio.TimerHandle] = field(default_factory=dict)  # killed -> restart

    def __post_init__(self) -> None:
        url = make_url(self.database_url)
        self.db_proxy = Proxy(f"{url.host or '127.0.0.1'}:{url.port or 5432}")

    async def start(self) -> None:
        url = make_url(self.database_url)
        host, _, port = (await self.db_proxy.start()).rpartition(":")
        proxied = url.set(host=host, port=int(port)).render_as_string(hide_password=False)
        for _ in range(2):
            server = ServerProcess(proxied, self.tmp, scheduling=True)
            server.env.update(
                {
                    "VGLOBAL_AGENTS__HEARTBEAT_INTERVAL_S": "1",
                    "VGLOBAL_AGENTS__OUTBOX_POLL_S": "0.2",
                    "VGLOBAL_LOG_LEVEL": "warning",
                    "VGLOBAL_DB_POOL_SIZE": "6",
                }
            )
            self.replicas.append(server)
            await asyncio.to_thread(server.start)
        spec = self.tmp / "cluster.yaml"
        spec.write_text(SPEC)
        async with self.api() as api:
            for name in CLUSTERS:
                created = await api.post("/api/v1/clusters", json={"name": name})
                assert created.status_code == 201, created.text
                proxies, addresses = [], []
                for server in self.replicas:
                    proxies.append(Proxy(server.grpc_target))
                    addresses.append(await proxies[-1].start())
                token = created.json()["agentToken"]
                target = "ipv4:" + ",".join(addresses)
                log = self.tmp / f"{name}.log"
                agent = Agent(name, token, proxies, target, spec, log)
                self.agents[name] = agent
                agent.start()
            for a, b in zip(CLUSTERS, CLUSTERS[1:] + CLUSTERS[:1], strict=True):
                link = {"clusterA": a, "clusterB": b, "capacityGbps": 400}
                assert (await api.post("/api/v1/links", json=link)).status_code == 201

    def api(self) -> httpx.AsyncClient:
        """A client of whichever replica is up (tried in turn)."""
        return httpx.AsyncClient(
            base_url=self.replicas[0].url,
            headers=ADMIN,
            timeout=10,
            transport=_FailoverTransport(self.replicas),
        )

    async def stop(self) -> None:
        for agent in self.agents.values():
            agent.kill()
            for proxy in agent.proxies:
                await proxy.close()
        for server in self.replicas:
            await asyncio.to_thread(server.stop)
        await self.db_proxy.close()

    # -- faults -----------------------------------------------------------------------------

    async def inject(self, kind: str) -> None:
        self.figures.faults[kind] += 1
        if kind in ("kill-replica", "kill-leader"):
            await self._kill_replica(leader=kind == "kill-leader")
        elif kind == "kill-agent":
            up = sorted(set(self.agents) - set(self.down))
            if up:
                name = self.rng.choice(up)
                self.agents[name].kill()
                self.down[name] = asyncio.get_running_loop().call_later(
                    self.rng.uniform(1, 10), self._restart_agent, name
                )
        elif kind == "cut-database":
            self.db_proxy.cut()
        elif kind == "reset-agent":
            for proxy in self.agents[self.rng.choice(CLUSTERS)].proxies:
                proxy.cut()
        elif kind == "stall-agent":
            proxies = self.agents[self.rng.choice(CLUSTERS)].proxies
            for proxy in proxies:
                proxy.partition()
            stall = self.rng.uniform(1, 8)
            asyncio.get_running_loop().call_later(stall, lambda: [p.heal() for p in proxies])

    def _restart_agent(self, name: str) -> None:
        self.down.pop(name).cancel()
        self.agents[name].start()
        self.returns.append((name, datetime.now(UTC)))

    async def _kill_replica(self, *, leader: bool) -> None:
        """SIGKILL a replica (the scheduling leader, or either) and start it again."""
        index = self.rng.randrange(2)
        if leader:
            leading = await asyncio.gather(*(_leads(s) for s in self.replicas))
            index = leading.index(True) if True in leading else index
        server = self.replicas[index]
        await asyncio.to_thread(server.kill)
        await asyncio.to_thread(server.start)


async def _leads(server: ServerProcess) -> bool:
    try:
        async with httpx.AsyncClient(timeout=2) as client:
            text = (await client.get(f"{server.url}/metrics", headers=ADMIN)).text
    except httpx.HTTPError:
        return False
    return "vglobal_scheduler_leader 1.0" in text


class _FailoverTransport(httpx.AsyncBaseTransport):
    """Sends a request to the first replica that accepts the connection (as a load balancer
    would): a killed replica is not an error the client sees."""

    def __init__(self, replicas: list[ServerProcess]) -> None:
        self.replicas = replicas
        self.inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        error: Exception | None = None
        for server in self.replicas:
            request.url = request.url.copy_with(port=server.port)
            request.headers["Host"] = f"127.0.0.1:{server.port}"
            try:
                return await self.inner.handle_async_request(request)
            except httpx.ConnectError as exc:  # (not sent: a request that was may have acted)
                error = exc
        assert error is not None
        raise error

    async def aclose(self) -> None:
        await self.inner.aclose()


def document(i: int, rng: random.Random) -> dict[str, Any] | str:
    """A job: a quarter must split (96 GPUs: more than a 64-GPU cluster), one in ten is
    invalid (refused, never stored), the rest 8-32 GPUs; each runs 200-600 job seconds."""
    runtime = f"{rng.randint(200, 600)}s"
    roll = rng.random()
    if roll < 0.1:
        bad = job_document(f"bad-{i:04d}", replicas=2)
        bad["spec"]["tasks"][0]["replicas"] = -1
        return bad
    if roll < 0.35:
        doc = job_document(f"split-{i:04d}", replicas=12, runningEstimate=runtime)
        doc["metadata"]["annotations"] = split_annotations(4, crossing_gbps=50)
        return doc
    return job_document(f"whole-{i:04d}", replicas=rng.randint(1, 4), runningEstimate=runtime)


async def soak(database_url: str, tmp: Path, config: SoakConfig) -> Figures:
    """Run the fleet, the submissions, the faults and the sampling; the figures."""
    rng = random.Random(config.seed)
    fleet = Fleet(database_url, tmp, rng)
    figures = fleet.figures
    try:
        await fleet.start()
        async with fleet.api() as api:
            await _wait_ready(api)
            faults_end = time.monotonic() + config.seconds
            tasks = [
                asyncio.create_task(_submit(api, rng, figures, faults_end, config.job_every_s)),
                asyncio.create_task(_faults(fleet, config, faults_end)),
            ]
            while time.monotonic() < faults_end:
                await sample(api, figures, fleet.returns)
                await asyncio.sleep(config.sample_every_s)
            await asyncio.gather(*tasks)
            for name in list(fleet.down):  # every agent back before settling
                fleet._restart_agent(name)
            settle_end = time.monotonic() + config.settle_s
            while time.monotonic() < settle_end:
                await sample(api, figures, fleet.returns)
                await asyncio.sleep(config.sample_every_s)
            for _ in range(FINAL_SAMPLES):  # stuck: in every one of them, not a passing moment
                await sample(api, figures, fleet.returns, final=True)
                await asyncio.sleep(FINAL_EVERY_S)
    finally:
        await fleet.stop()
    return figures


async def _wait_ready(api: httpx.AsyncClient) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        items = (await api.get("/api/v1/clusters")).json()["items"]
        if len(items) == len(CLUSTERS) and all(c["state"] == "Ready" for c in items):
            return
        await asyncio.sleep(0.5)
    raise AssertionError(f"clusters not ready: {items}")


async def _submit(
    api: httpx.AsyncClient, rng: random.Random, figures: Figures, end: float, every_s: float
) -> None:
    i = 0
    while time.monotonic() < end:
        i += 1
        doc = document(i, rng)
        figures.submitted.add(doc["metadata"]["name"])  # type: ignore[index]
        try:
            response = await api.post("/api/v1/jobs", json=doc)
        except httpx.HTTPError as exc:
            figures.unanswered += 1
            figures.notes.append(f"submit {i}: {exc!r}")
        else:
            figures.answer(response.status_code)
            if response.status_code == 201:
                figures.accepted[response.json()["uid"]] = doc["metadata"]["name"]  # type: ignore[index]
            elif response.status_code < 500:
                figures.refused.add(doc["metadata"]["name"])  # type: ignore[index]
        await asyncio.sleep(rng.uniform(0.5, 1.5) * every_s)


async def _faults(fleet: Fleet, config: SoakConfig, end: float) -> None:
    await asyncio.sleep(fleet.rng.uniform(0.5, 1.5) * config.fault_every_s)
    # Every kind once first (in a seeded order), so that a short run meets each of them.
    first = fleet.rng.sample(config.faults, len(config.faults))
    while time.monotonic() < end:
        kind = first.pop() if first else fleet.rng.choice(config.faults)
        try:
            await fleet.inject(kind)
        except Exception as exc:  # a fault that could not be injected is reported, not fatal
            fleet.figures.notes.append(f"fault {kind}: {exc!r}")
        await asyncio.sleep(fleet.rng.uniform(0.5, 1.5) * config.fault_every_s)
