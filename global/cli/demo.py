"""`vglobal demo`: the main job on the embedded default (SQLite). Starts a Global server and
one agent per simulated member cluster (one cut from the real Lingjun fabric, two from YAML
specs), links and queues, submits the example jobs and shows the aggregated inventory."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from volcano_global.cli.client import Client, CliError, Connection
from volcano_global.cli.output import Format, console, render
from volcano_global.cli.resources import CLUSTER_COLUMNS, JOB_COLUMNS, LINK_COLUMNS, QUEUE_COLUMNS
from volcano_global.services.jobs import NOT_YET_SCHEDULED

CLUSTERS = [
    # name, agent arguments (examples dir relative), labels
    (
        "gpu-east",
        ["--lingjun-block", "0", "--gpu-model", "H100"],
        {"region": "us-east", "zone": "us-east-1a", "site": "campus-a"},
    ),
    (
        "gpu-west",
        ["--spec", "clusters/gpu-west.yaml"],
        {"region": "us-west", "zone": "us-west-2b", "site": "campus-b"},
    ),
    (
        "gpu-central",
        ["--spec", "clusters/gpu-central.yaml"],
        {"region": "us-east", "zone": "us-east-1c", "site": "campus-a"},
    ),
]
LINKS = [
    ("gpu-east", "gpu-central", 400.0, 2.0),
    ("gpu-east", "gpu-west", 100.0, 31.0),
    ("gpu-west", "gpu-central", 200.0, 29.0),
]
QUEUES = [("llm", 4, 2048, 10), ("research", 1, 256, 0)]


def demo(
    port: Annotated[int, typer.Option(help="REST port (0 = any free port)")] = 0,
    data_dir: Annotated[Path, typer.Option(help="Where the demo's SQLite file goes")] = Path(
        "vglobal-data/demo"
    ),
    examples: Annotated[Path, typer.Option(help="Job documents to submit")] = Path("docs/examples"),
    keep_running: Annotated[bool, typer.Option(help="Leave the server running at the end")] = False,
) -> None:
    """Run the demo end to end on a fresh SQLite database."""
    data_dir.mkdir(parents=True, exist_ok=True)
    for stale in data_dir.glob("demo.db*"):
        stale.unlink()
    port = port or _free_port()
    grpc_port = _free_port()
    token = "vg_demo_" + secrets.token_urlsafe(24)
    url = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "VGLOBAL_DATABASE_URL": f"sqlite+aiosqlite:///{data_dir.resolve()}/demo.db",
        "VGLOBAL_ADMIN_TOKEN": token,
        "VGLOBAL_HOST": "127.0.0.1",
        "VGLOBAL_PORT": str(port),
        "VGLOBAL_GRPC_PORT": str(grpc_port),
        "VGLOBAL_LOG_LEVEL": "warning",
    }
    console.rule("[bold]Volcano Global demo")
    console.print(f"starting the Global server on {url} (SQLite in {data_dir}/demo.db)")
    server = subprocess.Popen([sys.executable, "-m", "volcano_global.cli.main", "server"], env=env)
    api = Client(Connection(server=url, token=token))
    agents: list[subprocess.Popen[bytes]] = []
    try:
        _wait_ready(api, server)
        agents = _start_agents(api, examples, grpc_port, data_dir)
        _populate(api, examples)
        if keep_running:
            console.print(f"\nserver running at {url}; admin token: {token}\nCtrl-C stops it.")
            server.wait()
    except KeyboardInterrupt:
        pass
    finally:
        api.close()
        for process in [*agents, server]:
            process.terminate()
        for process in [*agents, server]:
            process.wait(timeout=15)


def _start_agents(
    api: Client, examples: Path, grpc_port: int, data_dir: Path
) -> list[subprocess.Popen[bytes]]:
    """Register each cluster and start its agent; wait until every inventory has arrived."""
    console.rule("member clusters, each with its own agent")
    agents = []
    for name, arguments, labels in CLUSTERS:
        token = api.request("POST", "/api/v1/clusters", json={"name": name, "labels": labels})[
            "agentToken"
        ]
        args = [str(examples / a) if a.endswith(".yaml") else a for a in arguments]
        log = (data_dir / f"agent-{name}.log").open("wb")
        agents.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "volcano_global.cli.main",
                    "agent",
                    "--cluster",
                    name,
                    "--global",
                    f"127.0.0.1:{grpc_port}",
                    *args,
                ],
                env={**os.environ, "VGLOBAL_AGENT_TOKEN": token},
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        clusters = api.request("GET", "/api/v1/clusters")["items"]
        if all(c["state"] == "Ready" and c["inventoryGeneration"] > 0 for c in clusters):
            break
        if any(a.poll() is not None for a in agents):
            raise CliError(f"an agent exited; see {data_dir}/agent-*.log")
        time.sleep(0.2)
    else:
        raise CliError(
            f"the agents' inventories did not arrive within 60 s; see {data_dir}/agent-*.log"
        )
    render(api.request("GET", "/api/v1/clusters"), Format.TABLE, CLUSTER_COLUMNS)
    return agents


def _populate(api: Client, examples: Path) -> None:
    console.rule("inter-cluster links")
    for a, b, gbps, latency in LINKS:
        api.request(
            "POST",
            "/api/v1/links",
            json={"clusterA": a, "clusterB": b, "capacityGbps": gbps, "latencyMs": latency},
        )
    render(api.request("GET", "/api/v1/links"), Format.TABLE, LINK_COLUMNS)

    console.rule("queues")
    for name, weight, quota, priority in QUEUES:
        api.request(
            "POST",
            "/api/v1/queues",
            json={"name": name, "weight": weight, "gpuQuota": quota, "priority": priority},
        )

    console.rule(f"submitting the jobs in {examples}")
    documents = sorted(examples.glob("*.yaml"))
    if not documents:
        raise CliError(f"no job documents (*.yaml) in {examples}")
    for path in documents:
        job = api.request(
            "POST",
            "/api/v1/jobs",
            content=path.read_bytes(),
            headers={"Content-Type": "application/yaml"},
        )
        split = job["splitPolicy"]
        how = (
            f"may split over up to {split['maxClusters']} clusters"
            if split["mode"] == "auto"
            else "one cluster"
        )
        console.print(
            f"  {path.name}: {job['kind']} {job['namespace']}/{job['name']}, "
            f"{job['totalPods']} pods, {job['totalGpus']} GPUs, {how}"
        )
    render(api.request("GET", "/api/v1/queues"), Format.TABLE, QUEUE_COLUMNS)

    console.rule("jobs after the first scheduling round (CP-SAT)")
    deadline = time.monotonic() + 30
    jobs = api.request("GET", "/api/v1/jobs")
    while time.monotonic() < deadline:
        jobs = api.request("GET", "/api/v1/jobs")
        if all(j["pendingReason"] != NOT_YET_SCHEDULED for j in jobs["items"]):
            break
        time.sleep(0.2)
    render(jobs, Format.TABLE, [*JOB_COLUMNS, ("WHY PENDING", lambda j: j["pendingReason"] or "-")])
    for job in jobs["items"]:
        if job["state"] != "Placed":
            continue
        placement = api.request("GET", f"/api/v1/jobs/{job['uid']}")["placement"]
        parts = [f"{s['pods']} pods in {s['cluster']}" for s in placement["shares"]]
        parts += [
            f"{r['gbps']:g} Gbps on {r['clusterA']}<->{r['clusterB']}"
            for r in placement["linkReservations"]
        ]
        console.print(f"  {job['namespace']}/{job['name']}: {'; '.join(parts)}")
    render(api.request("GET", "/api/v1/links"), Format.TABLE, LINK_COLUMNS)
    console.print("\nThe agents now run the placed shares in their simulated clusters.")


def _wait_ready(api: Client, server: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise CliError(f"the server exited with code {server.returncode}")
        try:
            api.request("GET", "/readyz")
            return
        except CliError:
            time.sleep(0.2)
    raise CliError(f"the server was not ready within {timeout:.0f} s")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
