"""`vglobal demo`: the main job on the embedded default (SQLite). Starts a Global server and
one agent per simulated member cluster (one cut from the real Lingjun fabric, two from YAML
specs), links and queues, submits the demo jobs and follows them to the end on a compressed
clock: placed (one split over two clusters, one waiting for link bandwidth, one staging its
dataset, one waiting for its dataset's cluster), dispatched, running, finished."""

from __future__ import annotations

import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from volcano_global.cli.client import Client, CliError, Connection
from volcano_global.cli.data import DATA_SOURCE_COLUMNS
from volcano_global.cli.fleet import CLUSTER_COLUMNS, LINK_COLUMNS
from volcano_global.cli.output import Format, console, render
from volcano_global.cli.resources import QUEUE_COLUMNS

CLUSTERS = [
    # name, agent arguments (examples dir relative), labels
    (
        "gpu-east",
        ["--spec", "clusters/gpu-east.yaml"],
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
QUEUES = [("llm", 4, 4096, 10), ("research", 1, 1024, 0)]
TERMINAL = {"Succeeded", "Failed", "Cancelled"}


def demo(
    port: Annotated[int, typer.Option(help="REST port (0 = any free port)")] = 0,
    data_dir: Annotated[Path, typer.Option(help="Where the demo's SQLite file goes")] = Path(
        "vglobal-data/demo"
    ),
    examples: Annotated[
        Path, typer.Option(help="Directory with clusters/ specs and the jobs to submit")
    ] = Path("docs/examples"),
    jobs: Annotated[
        str, typer.Option(help="Job documents to submit (glob under --examples)")
    ] = "demo/*.yaml",
    data: Annotated[
        str, typer.Option(help="DataSources to apply before the jobs (glob under --examples)")
    ] = "demo-data/*.yaml",
    time_scale: Annotated[
        float, typer.Option(min=0.0001, help="Wall seconds per simulated second")
    ] = 0.02,
    timeout: Annotated[
        float, typer.Option(help="Give up (exit 1) if the jobs have not finished by then (s)")
    ] = 300.0,
    keep_running: Annotated[
        bool, typer.Option(help="Leave the server running at the end (Ctrl-C stops it)")
    ] = False,
) -> None:
    """Run the whole story on a fresh SQLite database: three simulated clusters with real
    topologies and links, jobs placed (one split across two clusters, one waiting for link
    bandwidth, others whole), run on a compressed clock, and finished. Ends by itself."""
    data_dir.mkdir(parents=True, exist_ok=True)
    for stale in data_dir.glob("demo.db*"):
        stale.unlink()
    port = port or _free_port()
    grpc_port = _free_port()
    token = "vg_demo_" + secrets.token_urlsafe(24)
    url = f"http://127.0.0.1:{port}"
    env = _server_env(data_dir, port, grpc_port, token)
    console.rule("[bold]Volcano Global demo")
    console.print(f"starting the Global server on {url} (SQLite in {data_dir}/demo.db)")
    server = subprocess.Popen([sys.executable, "-m", "volcano_global.cli.main", "server"], env=env)
    api = Client(Connection(server=url, token=token))
    agents: list[subprocess.Popen[bytes]] = []
    # `timeout`, CI and service managers stop with SIGTERM: the demo's processes go with it.
    previous = signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        _wait_ready(api, server)
        _start_agents(api, examples, grpc_port, data_dir, time_scale, agents)
        _populate(api)
        _apply_data(api, sorted(examples.glob(data)))
        uids = _submit(api, sorted(examples.glob(jobs)))
        _follow(api, uids, time_scale=time_scale, timeout=timeout)
        _summary(api, uids, time_scale=time_scale)
        _ending(url, token, server if keep_running else None)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second one must not cut the cleanup
        api.close()
        for process in [*agents, server]:
            process.terminate()
        for process in [*agents, server]:
            process.wait(timeout=15)
        _stop_strays({p.pid for p in [*agents, server]})
        signal.signal(signal.SIGTERM, previous)


def _stop_strays(known: set[int]) -> None:
    """Terminate and reap the demo's other children: an agent forked just as a SIGTERM came,
    whose `Popen` the handler cut short before it joined the list the cleanup stops."""
    strays = [pid for pid in _children(os.getpid()) if pid not in known]
    for pid in strays:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
    deadline = time.monotonic() + 15
    while strays and time.monotonic() < deadline:
        strays = [pid for pid in strays if _running(pid)]
        time.sleep(0.05)


def _running(child: int) -> bool:
    """Whether the child has not ended (reaping it if it has)."""
    try:
        return os.waitpid(child, os.WNOHANG) == (0, 0)
    except ChildProcessError:  # reaped already
        return False


def _children(parent: int) -> list[int]:
    """The processes whose parent is `parent` (Linux's /proc; elsewhere none are found)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # it ended meanwhile
            continue
        if int(fields[1]) == parent:
            found.append(int(stat.parent.name))
    return found


def _server_env(data_dir: Path, port: int, grpc_port: int, token: str) -> dict[str, str]:
    """The demo server's settings: its own SQLite file, ports and admin token."""
    return {
        **os.environ,
        "VGLOBAL_DATABASE_URL": f"sqlite+aiosqlite:///{data_dir.resolve()}/demo.db",
        "VGLOBAL_ADMIN_TOKEN": token,
        "VGLOBAL_HOST": "127.0.0.1",
        "VGLOBAL_PORT": str(port),
        "VGLOBAL_GRPC_PORT": str(grpc_port),
        "VGLOBAL_LOG_LEVEL": "warning",
        "VGLOBAL_SCHEDULING__INTERVAL_S": "0.5",
    }


def _ending(url: str, token: str, kept: subprocess.Popen[bytes] | None) -> None:
    """Where to look around; with the server `kept` running, how to reach it, until it ends."""
    console.print(
        f"\nThe web console is at {url}/ and the REST API at {url}/api/v1; the admin "
        f"token of this run is {token}"
    )
    if kept is None:
        console.print("(`vglobal demo --keep-running` leaves it up to look around.)")
        return
    console.print(
        f"The CLI against it: export VGLOBAL_SERVER={url} VGLOBAL_TOKEN={token}; then "
        "e.g. `vglobal jobs`, `vglobal describe cluster gpu-central`"
    )
    console.print("The server keeps running; Ctrl-C stops it.")
    kept.wait()


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)  # the shell's status for a process its signal ended


def _start_agents(
    api: Client,
    examples: Path,
    grpc_port: int,
    data_dir: Path,
    time_scale: float,
    agents: list[subprocess.Popen[bytes]],
) -> None:
    """Register each cluster and start its agent; wait until every inventory has arrived.
    Each agent joins `agents` as it starts: the caller stops them even if this is cut short
    (a signal, or an agent that exits) while the inventories are awaited."""
    console.rule("member clusters, each with its own agent")
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
                    "--time-scale",
                    str(time_scale),
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


def _populate(api: Client) -> None:
    console.rule("inter-cluster links and queues")
    for a, b, gbps, latency in LINKS:
        api.request(
            "POST",
            "/api/v1/links",
            json={"clusterA": a, "clusterB": b, "capacityGbps": gbps, "latencyMs": latency},
        )
    render(api.request("GET", "/api/v1/links"), Format.TABLE, LINK_COLUMNS)
    for name, weight, quota, priority in QUEUES:
        api.request(
            "POST",
            "/api/v1/queues",
            json={"name": name, "weight": weight, "gpuQuota": quota, "priority": priority},
        )
    render(api.request("GET", "/api/v1/queues"), Format.TABLE, QUEUE_COLUMNS)


def _apply_data(api: Client, documents: list[Path]) -> None:
    """Where the jobs' datasets are: applied as an admin applies DataSources."""
    if not documents:
        return
    console.rule("datasets and where they are")
    for path in documents:
        api.request(
            "POST",
            "/api/v1/apply",
            content=path.read_bytes(),
            headers={"Content-Type": "application/yaml"},
        )
    render(api.request("GET", "/api/v1/datasources"), Format.TABLE, DATA_SOURCE_COLUMNS)


def _submit(api: Client, documents: list[Path]) -> list[str]:
    console.rule("submitting the jobs")
    if not documents:
        raise CliError("no job documents to submit")
    uids = []
    for path in documents:
        job = api.request(
            "POST",
            "/api/v1/jobs",
            content=path.read_bytes(),
            headers={"Content-Type": "application/yaml"},
        )
        uids.append(job["uid"])
        split = job["splitPolicy"]
        how = (
            f"may split over up to {split['maxClusters']} clusters"
            if split["mode"] == "auto"
            else "one cluster"
        )
        console.print(
            f"  {path.name}: {job['namespace']}/{job['name']}, {job['totalPods']} pods, "
            f"{job['totalGpus']} {job['gpuModel'] or ''} GPUs, {how}"
        )
    return uids


def _follow(api: Client, uids: list[str], *, time_scale: float, timeout: float) -> None:
    """Print every state change and pending reason as it happens, until every job ends."""
    # Imported here: the services pull in SQLAlchemy, which no other command of the client needs.
    from volcano_global.services.jobs.submission import NOT_YET_SCHEDULED

    console.rule(f"running on a compressed clock (1 simulated hour = {3600 * time_scale:g} s)")
    started = time.monotonic()
    seen: dict[str, tuple[str, str, str]] = {}
    shown: set[str] = set()  # placements already described (a poll may not catch Placed)
    while True:
        elapsed = time.monotonic() - started
        jobs = [api.request("GET", f"/api/v1/jobs/{uid}") for uid in uids]
        for job in jobs:
            now = (job["state"], _gist(job["pendingReason"]), _staging(job))
            if seen.get(job["uid"]) != now and job["pendingReason"] != NOT_YET_SCHEDULED:
                seen[job["uid"]] = now
                console.print(
                    f"[dim]{elapsed:6.1f} s (sim {elapsed / time_scale / 60:5.1f} min)[/dim]  "
                    f"{job['namespace']}/{job['name']}: [bold]{job['state']}[/bold]"
                    + _detail(job, shown)
                )
        if all(j["state"] in TERMINAL for j in jobs):
            return
        if elapsed > timeout:
            raise CliError(f"the jobs did not all finish within {timeout:g} s")
        time.sleep(0.25)


def _gist(reason: str | None) -> str:
    """A pending reason without its numbers: a wait that only counts down (`room expected in
    about 2,399 s`, then 2,398 s) is not news; a reason that says something else is."""
    return re.sub(r"\d[\d,.]*", "#", reason or "")


def _detail(job: dict[str, Any], shown: set[str]) -> str:
    """The pending reason, or a placement's shares and reservations the first time the job is
    seen holding it (Placed, or already Dispatched or Running: dispatch may beat the poll)."""
    placement, staging = job.get("placement"), _staging(job)
    if job["state"] == "Pending" and job.get("pendingReason"):
        return f" - {job['pendingReason']}"
    if (
        job["state"] in ("Placed", "Dispatched", "Running")
        and isinstance(placement, dict)
        and placement["uid"] not in shown
    ):
        shown.add(placement["uid"])
        parts = [f"{s['pods']} pods in {s['cluster']}" for s in placement["shares"]]
        parts += [
            f"{r['gbps']:g} Gbps on {r['clusterA']}<->{r['clusterB']}"
            for r in placement["linkReservations"]
        ]
        return " - " + "; ".join(parts + ([staging] if staging else []))
    return f" - {staging}" if staging else ""


def _staging(job: dict[str, Any]) -> str:
    """Where the job's shares copy its data in before their pods start, if they do."""
    placement = job.get("placement") or {}
    where = [s["cluster"] for s in placement.get("shares", ()) if s["phase"] == "Staging"]
    return f"staging its data into {', '.join(where)}" if where else ""


def _summary(api: Client, uids: list[str], *, time_scale: float) -> None:
    console.rule("summary")
    table = Table("JOB", "STATE", "CLUSTERS", "SUBMIT->RUNNING", "PLACED->RUNNING")
    for uid in uids:
        job = api.request("GET", f"/api/v1/jobs/{uid}")
        events = api.request("GET", f"/api/v1/jobs/{uid}/events")["items"]
        placed = [e for e in events if e["reason"] == "Placed"]
        clusters = placed[0]["message"].split(": ", 1)[-1] if placed else "-"
        stamps = job["timestamps"]
        table.add_row(
            f"{job['namespace']}/{job['name']}",
            job["state"],
            clusters,
            _between(stamps["submittedAt"], stamps["startedAt"]),
            _between(stamps["placedAt"], stamps["startedAt"]),
        )
    console.print(table)
    console.print(
        f"(wall-clock seconds; the simulated clusters ran {1 / time_scale:g}x faster than real "
        "time, the control plane did not)"
    )


def _between(start: str | None, end: str | None) -> str:
    if not start or not end:
        return "-"
    seconds = (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()
    return f"{seconds:.2f} s"


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
