"""What must hold after any fault: no accepted job lost or invented, every job in the state it
should reach, no share run twice, nothing held after the jobs end (GPUs in the clusters, link
bandwidth and placements in the Global, undelivered dispatch messages). Each check counts what
it looked at, for the fault report."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from core_agent.simulated.cluster import ClusterSpec, SimulatedCluster
from tests.agents import join
from volcano_global.rpc.shares import ShareAssignment

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts" / "faults"


class RecordingCluster(SimulatedCluster):
    """A simulated cluster that records every time a share's GPUs are bound and released."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.binds: Counter[str] = Counter()  # placement id -> times bound here
        self.timeline: list[tuple[float, str, str, str]] = []  # (t, bind|release, job, placement)

    def _bind(self, assignment: ShareAssignment) -> list[tuple[str, int]] | None:
        bound = super()._bind(assignment)
        if bound is not None:
            self.binds[assignment.placement_id] += 1
            self.timeline.append(
                (time.monotonic(), "bind", assignment.job_uid, assignment.placement_id)
            )
        return bound

    def _release(self, share: Any) -> None:
        if share.bound:
            a = share.assignment
            self.timeline.append((time.monotonic(), "release", a.job_uid, a.placement_id))
        super()._release(share)


async def join_recording_agents(
    api: Any,
    target: str,
    spec: ClusterSpec,
    *,
    names: tuple[str, ...],
    time_scale: float,
    stop: asyncio.Event,
) -> tuple[dict[str, RecordingCluster], list[asyncio.Task[None]]]:
    """Register each cluster through `api` (an admin httpx client) and start its agent on a
    recording simulated cluster, streaming to `target` until `stop`."""
    clusters: dict[str, RecordingCluster] = {}
    tasks = []
    for name in names:
        clusters[name] = RecordingCluster.from_spec(name, spec)
        clusters[name].time_scale = time_scale
        tasks.append(await join(api, name, clusters[name], target=target, stop=stop))
    return clusters, tasks


@dataclass
class Checked:
    """How many things each invariant was checked on."""

    counts: Counter[str] = field(default_factory=Counter)

    def add(self, name: str, n: int = 1) -> None:
        self.counts[name] += n


# Link bandwidth still reserved by an active placement.
HELD_LINKS = (
    "SELECT count(*) FROM link_reservations r JOIN placements p "
    "ON p.id = r.placement_id WHERE p.state = 'Active'"
)
# Dispatch messages no agent acknowledged.
UNDELIVERED = (
    "SELECT o.kind, c.name, p.state, o.created_at FROM outbox o "
    "JOIN clusters c ON c.id = o.cluster_id "
    "JOIN placements p ON p.id = o.placement_id WHERE o.acked_at IS NULL"
)
# Every Warning event, oldest first, with the job's or the cluster's name.
WARNINGS = (
    "SELECT e.last_seen_at, coalesce(j.name, c.name), e.reason, e.message "
    "FROM events e LEFT JOIN jobs j ON j.id = e.job_id "
    "LEFT JOIN clusters c ON c.id = e.cluster_id "
    "WHERE e.type = 'Warning' ORDER BY e.last_seen_at"
)


async def check_invariants(
    database_url: str,
    clusters: dict[str, RecordingCluster],
    *,
    accepted: dict[str, str],  # "namespace/name" -> uid, from the answers the client got
    final_state: str = "Succeeded",
    runs_once: bool = True,  # every job ran under exactly one placement (nothing requeued)
) -> Checked:
    checked = Checked()
    engine = create_async_engine(database_url)
    try:
        await _acknowledged(engine, within=120.0)
        async with engine.connect() as db:
            jobs = (await db.execute(text("SELECT id, namespace, name, state FROM jobs"))).all()
            placements = (await db.execute(text("SELECT id, job_id, state FROM placements"))).all()
            held = (await db.execute(text(HELD_LINKS))).scalar_one()
            undelivered = (await db.execute(text(UNDELIVERED))).all()
            shares = (await db.execute(text("SELECT placement_id FROM cluster_shares"))).all()
            warnings = (await db.execute(text(WARNINGS))).all()
    finally:
        await engine.dispose()

    stored = {f"{ns}/{name}": str(uid).replace("-", "") for uid, ns, name, _ in jobs}
    wanted = {key: uid.replace("-", "") for key, uid in accepted.items()}
    assert len(jobs) == len(stored), "a job name stored twice"
    assert stored == wanted, f"stored jobs differ from accepted: {set(stored) ^ set(wanted)}"
    checked.add("accepted jobs stored exactly once", len(wanted))

    states = Counter(state for *_, state in jobs)
    assert states == Counter({final_state: len(jobs)}), f"job states: {dict(states)}"
    checked.add(f"jobs {final_state}", len(jobs))

    assert not [p for p in placements if p.state == "Active"], "placements still active"
    per_job = Counter(str(p.job_id) for p in placements if p.state == "Released")
    if runs_once:
        twice = {job: n for job, n in per_job.items() if n != 1}
        why = "\n".join(" | ".join(str(v) for v in row) for row in warnings)
        assert not twice, f"jobs released under several placements: {twice}; warnings:\n{why}"
    checked.add("placements ended (none Active)", len(placements))
    assert held == 0, f"{held} link reservations held by active placements"
    checked.add("link reservations released", len(placements))
    assert not undelivered, f"dispatch messages never acknowledged: {undelivered}"
    checked.add("dispatch messages acknowledged")

    shares_of = Counter(str(p).replace("-", "") for (p,) in shares)
    for name, cluster in clusters.items():
        twice = {p: n for p, n in cluster.binds.items() if n > 1}
        assert not twice, f"{name} bound a share twice: {twice}"
        unknown = [p for p in cluster.binds if p.replace("-", "") not in shares_of]
        assert not unknown, f"{name} ran shares the Global never placed: {unknown}"
        checked.add("shares bound at most once", len(cluster.binds))
        busy = {n.name: n.used_gpus for n in cluster.nodes.values() if n.used_gpus}
        assert not busy, f"{name} still has GPUs bound: {busy}"
        checked.add("cluster GPUs freed", len(cluster.nodes))
        if runs_once:
            _no_overlap(name, cluster)
            checked.add("no job running two placements at once", len(cluster.binds))
    return checked


async def _acknowledged(engine: Any, *, within: float) -> None:
    """Acknowledgements trail the jobs' ends (a cancellation for a withdrawn placement, an agent
    reconnecting after the last fault - to a replica that may still be starting, a minute on a
    loaded host): give them `within` seconds; what is still unacknowledged then fails the check
    below."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        async with engine.connect() as db:
            query = text("SELECT count(*) FROM outbox WHERE acked_at IS NULL")
            if (await db.execute(query)).scalar_one() == 0:
                return
        await asyncio.sleep(0.2)


def _no_overlap(name: str, cluster: RecordingCluster) -> None:
    """A job never holds GPUs under two placements at the same time in one cluster."""
    holding: dict[str, set[str]] = {}
    for _, kind, job, placement in sorted(cluster.timeline):
        live = holding.setdefault(job, set())
        if kind == "bind":
            live.add(placement)
            assert len(live) == 1, f"{name}: job {job} holds GPUs under {sorted(live)}"
        else:
            live.discard(placement)


def write_report(name: str, report: dict[str, Any]) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.json"
    path.write_text(json.dumps(report, indent=2, sort_keys=True))
    print(json.dumps(report, indent=2, sort_keys=True))
    return path
