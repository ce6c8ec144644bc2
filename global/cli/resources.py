"""Commands on the Global's resources: jobs, clusters, links, queues."""

from __future__ import annotations

import sys
import uuid
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import typer

from volcano_global.cli import apply as watching
from volcano_global.cli.agent_command import OLD_SERVER_ENDPOINT, agent_command, agent_note
from volcano_global.cli.client import Client, CliError
from volcano_global.cli.context import client, options
from volcano_global.cli.data import CLAIM_WORDS, DATA_SOURCE_WORDS, STAGING_WORDS, get_data
from volcano_global.cli.fleet import CLUSTER_COLUMNS, FLEET_WORDS, LINK_COLUMNS, get_fleet
from volcano_global.cli.output import Column, Format, render, run_duration

JOB_COLUMNS: list[Column] = [
    ("NAMESPACE", lambda j: j["namespace"]),
    ("NAME", lambda j: j["name"]),
    ("KIND", lambda j: j["kind"]),
    ("QUEUE", lambda j: j["queue"]),
    ("STATE", lambda j: j["state"]),
    ("PODS", lambda j: j["totalPods"]),
    ("GPUS", lambda j: f"{j['totalGpus']} {j['gpuModel'] or ''}".strip()),
    ("CLUSTERS", lambda j: ",".join(j["clusters"]) or "-"),
    ("DURATION", run_duration),
]

# A watch prints a row again when a cell changes: a running job's duration would change at
# every read, so it shows the duration once the run has ended.
WATCH_JOB_COLUMNS: list[Column] = [
    *JOB_COLUMNS[:-1],
    ("DURATION", lambda j: run_duration(j) if j["timestamps"].get("finishedAt") else "-"),
]

PREVIEW_COLUMNS: list[Column] = [
    ("NAMESPACE", lambda j: j["namespace"]),
    ("NAME", lambda j: j["name"]),
    ("QUEUE", lambda j: j["queue"]),
    ("PODS", lambda j: j["totalPods"]),
    ("GPUS", lambda j: f"{j['totalGpus']} {j['gpuModel'] or ''}".strip()),
    ("VALID", lambda j: "yes (dry run: not stored)"),
    ("WOULD RUN IN", lambda j: ",".join(s["cluster"] for s in j["shares"]) or "-"),
    ("WHY NOT NOW", lambda j: j["reason"] or "-"),
]


def submit(
    ctx: typer.Context,
    files: Annotated[
        list[Path],
        typer.Option("-f", "--filename", "--file", help="Job YAML/JSON ('-' = stdin)"),
    ],
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Check each job with the server and show where it would run; store none",
        ),
    ] = False,
) -> None:
    """Submit Volcano Jobs or HyperJobs."""
    api = client(ctx)
    submitted = []
    for path in files:
        text = sys.stdin.read() if str(path) == "-" else _read(path)
        media = "application/json" if path.suffix == ".json" else "application/yaml"
        job = api.request(
            "POST",
            "/api/v1/jobs/preview" if dry_run else "/api/v1/jobs",
            content=text.encode(),
            headers={"Content-Type": media},
        )
        submitted.append(job)
    render({"items": submitted}, options(ctx).output, PREVIEW_COLUMNS if dry_run else JOB_COLUMNS)


def jobs(
    ctx: typer.Context,
    queue: Annotated[str | None, typer.Option(help="Only this queue")] = None,
    state: Annotated[
        str | None,
        typer.Option(help=f"Only this state, in any case: {', '.join(JOB_STATES)}"),
    ] = None,
    cluster: Annotated[
        str | None, typer.Option(help="Only jobs with a share in this cluster")
    ] = None,
    namespace: Annotated[str | None, typer.Option("-n", "--namespace")] = None,
    limit: Annotated[int, typer.Option(help="Jobs per page", min=1)] = 100,
    all_pages: Annotated[bool, typer.Option("--all", help="Follow every page")] = False,
) -> None:
    """List jobs, newest first (the first --limit of them; --all: every one)."""
    api = client(ctx)
    params = {
        "queue": queue,
        "state": job_state(state) if state else None,
        "cluster": cluster,
        "namespace": namespace,
        "limit": limit,
    }
    items: list[dict[str, Any]] = []
    while True:
        page = api.request("GET", "/api/v1/jobs", params={k: v for k, v in params.items() if v})
        items.extend(page["items"])
        token = page["metadata"].get("continue")
        if not (all_pages and token):
            break
        params["continue"] = token
    if token and not all_pages:  # as kubectl does: a cut list says so, out of the way of pipes
        typer.echo(f"(more jobs than these {len(items)}: a larger --limit, or --all)", err=True)
    render(
        {"items": items, "metadata": {"continue": None if all_pages else token}},
        options(ctx).output,
        JOB_COLUMNS,
    )


# The server's spelling of a job's states (JobState), which its list compares exactly.
JOB_STATES = ("Pending", "Placed", "Dispatched", "Running", "Succeeded", "Failed", "Cancelled")


def job_state(word: str) -> str:
    """A state as the server spells it, from any case (`running` -> `Running`)."""
    for state in JOB_STATES:
        if state.lower() == word.lower():
            return state
    raise CliError(f"unknown job state {word!r}: expected one of {', '.join(JOB_STATES)}")


DEFAULT_EVENTS = 50
JOB_WORDS = frozenset({"jobs", "job", "vcjob", "vcjobs", "vj", "hyperjob", "hyperjobs", "hj"})
QUEUE_WORDS = frozenset({"queues", "queue", "q"})


def get(
    ctx: typer.Context,
    what: Annotated[
        str,
        typer.Argument(
            help="jobs | queues | clusters | links | priorityclasses | datasources | "
            "datasourceclaims (kubectl's words too) | staging (data being copied: shares' "
            "staging and prefetch copies), or a job: UID, NS/NAME, NAME"
        ),
    ],
    name: Annotated[
        str | None,
        typer.Argument(help="One of them: a job, queue, cluster, PriorityClass; a cluster's links"),
    ] = None,
    namespace: Annotated[
        str | None,
        typer.Option("-n", "--namespace", help="Only this namespace's jobs or claims"),
    ] = None,
    watch: Annotated[
        bool, typer.Option("-w", "--watch", help="After the list, print each change until ^C")
    ] = False,
    interval_s: Annotated[
        float, typer.Option("--interval", help="Seconds between reads while watching", min=0.1)
    ] = 2.0,
) -> None:
    """Show one job (state, gang, placement, why pending), or list jobs or queues (`-w`: and
    follow their changes), clusters, links, PriorityClasses, the DataSources and
    DataSourceClaims, or the data in motion. `vglobal describe` tells one in full."""
    api = client(ctx)
    fmt = options(ctx).output
    if watch and (name is not None or what not in JOB_WORDS | QUEUE_WORDS):
        raise CliError("-w follows the list of jobs or of queues (`get jobs -w`, `get queues -w`)")
    if what in FLEET_WORDS:
        get_fleet(api, what, name, fmt)
        return
    if name is not None and what in QUEUE_WORDS:
        render(api.request("GET", f"/api/v1/queues/{name}"), fmt, QUEUE_COLUMNS)
        return
    if what in DATA_SOURCE_WORDS or what in CLAIM_WORDS or what in STAGING_WORDS:
        get_data(api, what, fmt, name=name, namespace=namespace)
        return
    if name is None and (what in JOB_WORDS or what in QUEUE_WORDS):
        queues = what in QUEUE_WORDS
        columns = QUEUE_COLUMNS if queues else JOB_COLUMNS
        read = watching.queue_list if queues else partial(watching.job_changes, namespace=namespace)
        if watch:
            key = (lambda q: q["name"]) if queues else (lambda j: j["uid"])
            watching.watch(
                api,
                read=read,
                key=key,
                columns=columns if queues else WATCH_JOB_COLUMNS,
                fmt=fmt,
                interval_s=interval_s,
            )
        else:
            items = read(api, None)[0]
            render({"items": items}, fmt, columns)
        return
    job = name if name is not None and what in JOB_WORDS else what
    detail = api.request("GET", f"/api/v1/jobs/{resolve_job(api, job)}")
    render(detail, fmt, [*JOB_COLUMNS, ("WHY PENDING", lambda j: j["pendingReason"] or "-")])


def cancel(
    ctx: typer.Context, job: Annotated[str, typer.Argument(help="UID, NAMESPACE/NAME or NAME")]
) -> None:
    """Cancel a job (a job already cancelled is said so, and left as it is)."""
    api = client(ctx)
    uid = resolve_job(api, job)
    before = api.request("GET", f"/api/v1/jobs/{uid}")
    detail = api.request("POST", f"/api/v1/jobs/{uid}/cancel")
    fmt = options(ctx).output
    if fmt is not Format.TABLE:
        render(detail, fmt, JOB_COLUMNS)
        return
    ref = f"{detail['namespace']}/{detail['name']}"
    if before["state"] == "Cancelled":
        typer.echo(f"job {ref} was already cancelled ({before['stateMessage'] or 'earlier'})")
    else:
        typer.echo(f"job {ref} cancelled")


def delete(
    ctx: typer.Context, job: Annotated[str, typer.Argument(help="UID, NAMESPACE/NAME or NAME")]
) -> None:
    """Delete a job as `kubectl delete` does: cancel it if it runs and free its name for a new
    submission (it stays readable by UID)."""
    api = client(ctx)
    detail = api.request("DELETE", f"/api/v1/jobs/{resolve_job(api, job)}")
    if options(ctx).output is not Format.TABLE:
        render(detail, options(ctx).output, JOB_COLUMNS)
        return
    typer.echo(f"job {detail['namespace']}/{detail['name']} deleted ({detail['state']})")


def events(
    ctx: typer.Context,
    job: Annotated[str, typer.Argument(help="UID, NAMESPACE/NAME or NAME")],
    limit: Annotated[
        int, typer.Option(help="Show the newest N events (0: all)", min=0)
    ] = DEFAULT_EVENTS,
) -> None:
    """Show a job's newest events (a job that retried for hours has thousands)."""
    api = client(ctx)
    data = api.request("GET", f"/api/v1/jobs/{resolve_job(api, job)}/events")
    items = data["items"]
    if limit and len(items) > limit:
        typer.echo(f"({len(items) - limit} older events not shown; --limit 0 shows all)", err=True)
        data = {**data, "items": items[:limit]}  # newest first
    render(
        data,
        options(ctx).output,
        [
            ("LAST SEEN", lambda e: e["lastSeenAt"]),
            ("TYPE", lambda e: e["type"]),
            ("REASON", lambda e: e["reason"]),
            ("COUNT", lambda e: e["count"]),
            ("MESSAGE", lambda e: e["message"]),
        ],
    )


COMMANDS = [submit, watching.apply, jobs, get, cancel, delete, events]

clusters_app = typer.Typer(
    help="Member clusters (lists them without a subcommand).", invoke_without_command=True
)
links_app = typer.Typer(
    help="Links between clusters (lists them without a subcommand).", invoke_without_command=True
)
queues_app = typer.Typer(
    help="Queues (lists them without a subcommand).", invoke_without_command=True
)

QUEUE_COLUMNS: list[Column] = [
    ("NAME", lambda q: q["name"]),
    ("STATE", lambda q: q.get("state", "Open")),
    ("PARENT", lambda q: q.get("parent") or "root"),
    ("WEIGHT", lambda q: q["weight"]),
    ("GPU QUOTA", lambda q: "-" if q["gpuQuota"] is None else q["gpuQuota"]),
    ("PRIORITY", lambda q: q["priority"]),
    ("DESERVED", lambda q: q.get("deservedGpus", q.get("fairShareGpus", 0))),
    ("ALLOCATED GPUS", lambda q: q["usage"]["allocatedGpus"]),
    ("PENDING", lambda q: q["usage"]["pendingJobs"]),
    ("ACTIVE", lambda q: q["usage"]["activeJobs"]),
]


@clusters_app.callback()
def clusters_list(ctx: typer.Context) -> None:
    if ctx.invoked_subcommand is None:
        render(client(ctx).request("GET", "/api/v1/clusters"), options(ctx).output, CLUSTER_COLUMNS)


@clusters_app.command("add")
def clusters_add(
    ctx: typer.Context,
    name: str,
    label: Annotated[list[str] | None, typer.Option("-l", "--label", help="key=value")] = None,
    description: str = "",
) -> None:
    """Register a cluster and print its agent token (shown once) and the command that runs
    its agent."""
    body = {"name": name, "description": description, "labels": _pairs(label or [])}
    api = client(ctx)
    created = api.request("POST", "/api/v1/clusters", json=body)
    render(
        created,
        options(ctx).output,
        [*CLUSTER_COLUMNS, ("AGENT TOKEN", lambda c: c["agentToken"])],
        None,
    )
    if options(ctx).output is Format.TABLE:
        typer.echo("\nRun its agent (next to the cluster, with its kubeconfig):\n")
        # A Global from before the field does not say its agent port: the default's.
        endpoint = created.get("agentEndpoint") or OLD_SERVER_ENDPOINT
        typer.echo(f"  {agent_command(api.server, name, created['agentToken'], endpoint)}\n")
        if note := agent_note(endpoint):
            typer.echo(note)


@clusters_app.command("delete")
def clusters_delete(ctx: typer.Context, name: str) -> None:
    client(ctx).request("DELETE", f"/api/v1/clusters/{name}")
    typer.echo(f"cluster {name} deleted")


@links_app.callback()
def links_list(ctx: typer.Context) -> None:
    if ctx.invoked_subcommand is None:
        render(client(ctx).request("GET", "/api/v1/links"), options(ctx).output, LINK_COLUMNS)


@links_app.command("add")
def links_add(
    ctx: typer.Context, cluster_a: str, cluster_b: str, gbps: float, latency_ms: float = 0.0
) -> None:
    body = {
        "clusterA": cluster_a,
        "clusterB": cluster_b,
        "capacityGbps": gbps,
        "latencyMs": latency_ms,
    }
    render(
        client(ctx).request("POST", "/api/v1/links", json=body),
        options(ctx).output,
        LINK_COLUMNS,
        None,
    )


@links_app.command("delete")
def links_delete(ctx: typer.Context, cluster_a: str, cluster_b: str) -> None:
    client(ctx).request("DELETE", f"/api/v1/links/{cluster_a}/{cluster_b}")
    typer.echo(f"link {cluster_a}<->{cluster_b} deleted")


@queues_app.callback()
def queues_list(ctx: typer.Context) -> None:
    if ctx.invoked_subcommand is None:
        render(client(ctx).request("GET", "/api/v1/queues"), options(ctx).output, QUEUE_COLUMNS)


@queues_app.command("add")
def queues_add(
    ctx: typer.Context, name: str, weight: int = 1, gpu_quota: int | None = None, priority: int = 0
) -> None:
    body = {"name": name, "weight": weight, "gpuQuota": gpu_quota, "priority": priority}
    render(
        client(ctx).request("POST", "/api/v1/queues", json=body),
        options(ctx).output,
        QUEUE_COLUMNS,
        None,
    )


@queues_app.command("delete")
def queues_delete(ctx: typer.Context, name: str) -> None:
    client(ctx).request("DELETE", f"/api/v1/queues/{name}")
    typer.echo(f"queue {name} deleted")


def resolve_job(api: Client, job: str) -> str:
    """A job's UID from a UID, NAMESPACE/NAME or NAME (the newest job of that name)."""
    try:
        return str(uuid.UUID(job))
    except ValueError:
        pass
    namespace, _, name = job.rpartition("/")
    params = {"name": name, "limit": 2}
    if namespace:
        params["namespace"] = namespace
    items = api.request("GET", "/api/v1/jobs", params=params)["items"]
    if not items:
        raise CliError(f"no job named {job!r}")
    if not namespace and len({i["namespace"] for i in items}) > 1:
        raise CliError(f"job name {name!r} exists in several namespaces; use NAMESPACE/NAME")
    return str(items[0]["uid"])


def _pairs(values: list[str]) -> dict[str, str]:
    result = {}
    for value in values:
        key, sep, val = value.partition("=")
        if not sep or not key:
            raise CliError(f"label {value!r}: expected key=value")
        result[key] = val
    return result


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as exc:
        raise CliError(f"{path}: {exc.strerror}") from None
