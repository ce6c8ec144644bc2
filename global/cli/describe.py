"""`vglobal describe`: one job, cluster or queue told in full, as `kubectl describe` tells a
resource: its fields, what it holds or runs, and its newest events."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, Any

import typer

from volcano_global.cli.client import Client, CliError
from volcano_global.cli.context import client, options
from volcano_global.cli.fleet import CLUSTER_WORDS, cluster_links, labels
from volcano_global.cli.output import Column, Format, gpus, render
from volcano_global.cli.resources import JOB_WORDS, QUEUE_WORDS, resolve_job

_KEY_WIDTH = 16
EVENTS_SHOWN = 10  # kubectl describe shows a resource's recent events, not its history
EVENT_COLUMNS: list[Column] = [
    ("LAST SEEN", lambda e: age(e["lastSeenAt"])),
    ("TYPE", lambda e: e["type"]),
    ("REASON", lambda e: e["reason"]),
    ("COUNT", lambda e: e["count"]),
    ("MESSAGE", lambda e: e["message"]),
]
SHARE_COLUMNS: list[Column] = [
    ("CLUSTER", lambda s: s["cluster"]),
    ("PODS", lambda s: s["pods"]),
    ("GPUS", lambda s: s["gpus"]),
    ("RANKS FROM", lambda s: s["rankOffset"]),
    ("PHASE", lambda s: s["phase"]),
    ("MESSAGE", lambda s: s["message"] or "-"),
]
DOMAIN_COLUMNS: list[Column] = [
    ("DOMAIN", lambda d: d["name"]),
    ("TIER", lambda d: d["tierName"] or d["tier"]),
    ("NODES", lambda d: d["nodes"]),
    ("NOT READY", lambda d: len(d["nodesNotReady"])),
    ("GPUS FREE/TOTAL", lambda d: gpus(d["capacity"])),
    ("BELOW", lambda d: d["children"]),
]
LINK_COLUMNS: list[Column] = [
    ("TO", lambda link: link["to"]),
    ("CAPACITY GBPS", lambda link: f"{link['capacityGbps']:g}"),
    ("RESERVED GBPS", lambda link: f"{link['reservedGbps']:g}"),
    ("LATENCY MS", lambda link: f"{link['latencyMs']:g}"),
]


def describe(
    ctx: typer.Context,
    kind: Annotated[str, typer.Argument(help="job (vcjob, hyperjob, ...) | cluster | queue")],
    name: Annotated[str, typer.Argument(help="A job's UID, NS/NAME or NAME; a cluster or queue")],
) -> None:
    """Tell one job, cluster or queue in full: its fields, its placement or topology, and its
    newest events (`-o json|yaml`: the same as one object)."""
    api = client(ctx)
    fmt = options(ctx).output
    if kind in JOB_WORDS:
        tell(_job(api, name), fmt, _job_lines)
    elif kind in CLUSTER_WORDS:
        tell(_cluster(api, name), fmt, _cluster_lines)
    elif kind in QUEUE_WORDS:
        tell({"queue": api.request("GET", f"/api/v1/queues/{name}")}, fmt, _queue_lines)
    else:
        raise CliError(f"cannot describe {kind!r}: expected job, cluster or queue")


def tell(found: dict[str, Any], fmt: Format, lines: Callable[[dict[str, Any]], None]) -> None:
    if fmt is Format.TABLE:
        lines(found)
    else:
        render(found, fmt, [])


def _job(api: Client, name: str) -> dict[str, Any]:
    uid = resolve_job(api, name)
    job = api.request("GET", f"/api/v1/jobs/{uid}")
    return {"job": job, "events": api.request("GET", f"/api/v1/jobs/{uid}/events")["items"]}


def _cluster(api: Client, name: str) -> dict[str, Any]:
    cluster = api.request("GET", f"/api/v1/clusters/{name}")
    topology = api.request("GET", f"/api/v1/clusters/{name}/topology", params={"top": "true"})
    links = []
    for link in cluster_links(api.request("GET", "/api/v1/links")["items"], name):
        other = link["clusterB"] if link["clusterA"] == name else link["clusterA"]
        links.append({"to": other, **{k: link[k] for k in _LINK_FIELDS}})
    events = api.request("GET", f"/api/v1/clusters/{name}/events")["items"]
    return {"cluster": cluster, "topTier": topology["domains"], "links": links, "events": events}


_LINK_FIELDS = ("capacityGbps", "reservedGbps", "latencyMs")


def _job_lines(found: dict[str, Any]) -> None:
    job = found["job"]
    times = job["timestamps"]
    _fields(
        ("Name", job["name"]),
        ("Namespace", job["namespace"]),
        ("UID", job["uid"]),
        ("Kind", job["kind"]),
        ("Queue", job["queue"]),
        ("Priority", _priority(job)),
        ("State", job["state"] + (f" ({job['stateMessage']})" if job["stateMessage"] else "")),
        ("Why pending", job["pendingReason"] or None),
        ("Requeues", job["requeues"] or None),
        ("Gang", _gang(job)),
        ("Split", _split(job["splitPolicy"])),
        ("Submitted", _when(times["submittedAt"])),
        ("Placed", _when(times["placedAt"])),
        ("Started", _when(times["startedAt"])),
        ("Finished", _when(times["finishedAt"])),
    )
    placement = job["placement"]
    if placement:
        _fields(("Placement", f"generation {placement['generation']}, {placement['state']}"))
        render({"items": placement["shares"]}, Format.TABLE, SHARE_COLUMNS)
        for link in placement["linkReservations"]:
            pair = f"{link['clusterA']}<->{link['clusterB']}"
            use = "staging" if link["staging"] else "the run"
            held = "held" if placement["state"] in ("Active", "Nominated") else "was held"
            typer.echo(f"  {link['gbps']:g} Gbps on {pair} {held} for {use}")
    _events(found["events"])


def _cluster_lines(found: dict[str, Any]) -> None:
    cluster = found["cluster"]
    nodes = cluster["nodes"]
    _fields(
        ("Name", cluster["name"]),
        ("Description", cluster["description"] or None),
        ("Labels", labels(cluster["labels"])),
        ("State", cluster["state"]),
        ("Heartbeat", _when(cluster["lastHeartbeatAt"]) or "none yet (no agent has connected)"),
        ("Nodes", f"{nodes['ready']} ready of {nodes['total']}"),
        ("GPUs free", gpus(cluster["capacity"])),
        ("Inventory", _inventory(cluster)),
    )
    if found["topTier"]:
        typer.echo("Topology (top tier; the console or GET .../topology?parent=NAME go deeper):")
        render({"items": found["topTier"]}, Format.TABLE, DOMAIN_COLUMNS)
    if found["links"]:
        typer.echo("Links:")
        render({"items": found["links"]}, Format.TABLE, LINK_COLUMNS)
    _events(found["events"])


def _queue_lines(found: dict[str, Any]) -> None:
    queue = found["queue"]
    usage = queue["usage"]
    quota = queue["gpuQuota"]
    _fields(
        ("Name", queue["name"]),
        ("State", queue.get("state", "Open")),
        ("Parent", queue.get("parent") or "root"),
        ("Weight", queue["weight"]),
        ("Priority", queue["priority"]),
        ("GPU quota", "none" if quota is None else quota),
        ("Deserved GPUs", queue.get("deservedGpus", queue.get("fairShareGpus"))),
        ("Allocated GPUs", usage["allocatedGpus"]),
        ("Jobs", f"{usage['activeJobs']} unfinished, {usage['pendingJobs']} of them pending"),
    )


def _fields(*pairs: tuple[str, Any]) -> None:
    """`Key:` then its value in one column, as kubectl describe; a None value is left out."""
    for key, value in pairs:
        if value is not None:
            typer.echo(f"{key + ':':<{_KEY_WIDTH}}{value}")


def _events(events: list[dict[str, Any]]) -> None:
    if not events:
        _fields(("Events", "<none>"))
        return
    shown = events[:EVENTS_SHOWN]
    more = f" (newest {len(shown)} of {len(events)})" if len(events) > len(shown) else ""
    typer.echo(f"Events:{more}")
    render({"items": shown}, Format.TABLE, EVENT_COLUMNS)


def _priority(job: dict[str, Any]) -> str:
    named = [p for p in (job["priorityClassName"], job["preemptionPolicy"]) if p]
    return f"{job['priority']}" + (f" ({', '.join(named)})" if named else "")


def _gang(job: dict[str, Any]) -> str:
    """Its pods by task, or a HyperJob's by child job (`trainer x2 (16 pods each)`)."""
    model = f" {job['gpuModel']}" if job["gpuModel"] else ""
    gang = job["gang"]
    gpus_text = f"{job['totalGpus']}{model} GPUs" if job["totalGpus"] else "no GPU"
    if gang["subJobs"]:
        parts = ", ".join(
            f"{s['name']} x{s['replicas']} ({s['pods']} pods each)" for s in gang["subJobs"]
        )
        least = gang["minSubJobs"]
        return f"{job['totalPods']} pods in child jobs {parts}, {gpus_text}" + (
            f", minSubJobs {least}" if least is not None else ""
        )
    tasks = ", ".join(f"{t['name']} x{t['replicas']}" for t in gang["tasks"])
    return f"{job['totalPods']} pods ({tasks}), {gpus_text}, minAvailable {gang['minAvailable']}"


def _split(split: dict[str, Any] | None) -> str | None:
    if not split:
        return None
    if split["mode"] == "never":
        return "never: runs whole in one cluster"
    if split["unit"] == "subJob":
        unit = "whole child jobs"
    else:
        unit = f"units of {split['unitPods']} pods" if split["unitPods"] else "any pods"
    return f"may split: {unit}, up to {split['maxClusters']} clusters ({split['source']})"


def _inventory(cluster: dict[str, Any]) -> str:
    generation = cluster["inventoryGeneration"]
    if not generation:
        return "none yet"
    return f"generation {generation}, updated {age(cluster['inventoryUpdatedAt'])} ago"


def _when(stamp: str | None) -> str | None:
    return None if stamp is None else f"{stamp} ({age(stamp)} ago)"


def age(stamp: str | None) -> str:
    """How long ago, in kubectl's short form (`45s`, `3m`, `2h`, `4d`)."""
    if stamp is None:
        return "-"
    seconds = int((datetime.now(UTC) - datetime.fromisoformat(stamp)).total_seconds())
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= 2 * size:
            return f"{seconds // size}{unit}"
    return f"{max(0, seconds)}s"
