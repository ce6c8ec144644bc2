"""What the API shows of jobs, read on the fast path (`db/fast_reads.py`): one job with its
latest placement, a page of job summaries. Rows are dicts keyed by the jobs table's column
names (plus `queue_name`); the statements are built once per shape."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Integer, and_, bindparam, or_, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from volcano_global.bounds import in_time
from volcano_global.db.bulk import cached_statement
from volcano_global.db.fast_reads import Read, Row
from volcano_global.db.models import (
    TERMINAL_JOB_STATES,
    Cluster,
    ClusterShare,
    Job,
    JobState,
    Link,
    LinkReservation,
    Placement,
    PlacementState,
    Queue,
)
from volcano_global.errors import Invalid, NotFound


@dataclass(frozen=True)
class JobFilter:
    queue: str | None = None
    state: JobState | None = None
    cluster: str | None = None
    namespace: str | None = None
    name: str | None = None
    text: str | None = None  # in the name or namespace
    queues: tuple[str, ...] | None = None  # only these queues (a queue user's)
    updated_since: datetime | None = None  # changed at or after (a watch's cursor)


@dataclass(frozen=True)
class PlacementView:
    id: uuid.UUID
    generation: int
    state: PlacementState
    created_at: datetime
    shares: list[Row]  # in rank order, with their `cluster` name
    reservations: list[Row]  # cluster_a, cluster_b, gbps, staging


async def job_view(session: AsyncSession, *, uid: uuid.UUID) -> tuple[Row, PlacementView | None]:
    """The job (every column and its queue's name) and its active placement, else its most
    recent one: 2 statements, 3 for a split or a staging (its link reservations)."""
    job = await _JOB.one_or_none(session, {"uid": uid})
    if job is None:
        raise NotFound(f"job {uid} not found")
    rows = await _LATEST_PLACEMENT.rows(session, {"job_id": uid})
    if not rows:
        return job, None
    first = rows[0]
    shares = [_share(row, job["gpu_model"]) for row in rows if row["cluster"] is not None]
    reservations = []
    # Only a split, or a share that copies its data in, reserves link bandwidth.
    if len(shares) > 1 or any(row["staging"] for row in rows):
        reservations = await _RESERVATIONS.rows(session, {"placement_id": first["placement_id"]})
    placement = PlacementView(
        id=first["placement_id"],
        generation=first["generation"],
        state=first["placement_state"],
        created_at=first["created_at"],
        shares=shares,
        reservations=reservations,
    )
    return job, placement


async def job_page(
    session: AsyncSession, *, filters: JobFilter, limit: int, continue_token: str | None
) -> tuple[list[Row], dict[uuid.UUID, list[str]], str | None]:
    """Job summaries, newest first; the clusters each one runs in, or ran in once finished
    (`shown_placement`, in rank order); the token of the next page (None on the last)."""
    shape = tuple(
        name
        for name in _FILTERS
        if getattr(filters, name) is not None and (name != "text" or filters.text)
    ) + (("continue",) if continue_token else ())  # a queue user of no queue sees no job
    params: dict[str, Any] = {"limit": limit + 1}
    for name in shape:
        if name == "continue":
            params["after_at"], params["after_id"] = _decode_cursor(continue_token or "")
        elif name == "text":
            text = filters.text or ""
            params["pattern"] = (
                "%" + text.replace("\\", "").replace("%", "").replace("_", "\\_") + "%"
            )
        else:
            params[name] = getattr(filters, name)
    rows = await cached_statement(("job page", shape), _page, shape).rows(session, params)
    page: list[Row] = []  # one row per job (a job on several clusters comes in several)
    clusters: dict[uuid.UUID, list[str]] = {}
    for row in rows:
        cluster = row.pop("cluster")
        if not page or page[-1]["id"] != row["id"]:
            page.append(row)
        if cluster is not None:
            clusters.setdefault(row["id"], []).append(cluster)
    token = None
    if len(page) > limit:
        page = page[:limit]
        token = _encode_cursor(page[-1])
    return page, clusters, token


_FILTERS = ("queue", "state", "namespace", "name", "queues", "text", "cluster", "updated_since")
_SUMMARY_COLUMNS = (
    Job.id,
    Job.name,
    Job.namespace,
    Job.kind,
    Job.priority,
    Job.priority_class_name,
    Job.preemption_policy,
    Job.state,
    Job.state_message,
    Job.pending_reason,
    Job.requeues,
    Job.total_pods,
    Job.total_gpus,
    Job.gpu_model,
    Job.submitted_at,
    Job.placed_at,
    Job.dispatched_at,
    Job.started_at,
    Job.finished_at,
    Job.updated_at,
)


def _page(shape: tuple[str, ...]) -> Read:
    """The page statement for the filters in `shape` (their values are parameters): the
    jobs of the page (one more, to tell whether a next page exists), each joined with the
    clusters of its active placement in rank order - one statement."""
    query = (
        select(*_SUMMARY_COLUMNS, Queue.name.label("queue_name"))
        .join(Queue, Queue.id == Job.queue_id)
        .order_by(Job.submitted_at.desc(), Job.id.desc())
        .limit(bindparam("limit", type_=Integer))
    )
    for name in ("queue", "state", "namespace", "name"):
        if name in shape:
            column = Queue.name if name == "queue" else getattr(Job, name)
            query = query.where(column == bindparam(name, type_=column.type))
    if "queues" in shape:
        query = query.where(Queue.name.in_(bindparam("queues", expanding=True)))
    if "text" in shape:
        pattern = bindparam("pattern", type_=Job.name.type)
        query = query.where(
            or_(Job.name.like(pattern, escape="\\"), Job.namespace.like(pattern, escape="\\"))
        )
    if "updated_since" in shape:
        query = query.where(Job.updated_at >= bindparam("updated_since", type_=Job.updated_at.type))
    if "cluster" in shape:
        holders = (
            select(ClusterShare.placement_id)
            .join(Cluster, Cluster.id == ClusterShare.cluster_id)
            .where(
                Cluster.name == bindparam("cluster", type_=Cluster.name.type),
                ClusterShare.placement_id == shown_placement(Job.id, Job.state),
            )
        )
        query = query.where(holders.exists())
    if "continue" in shape:
        after_at = bindparam("after_at", type_=Job.submitted_at.type)
        query = query.where(
            or_(
                Job.submitted_at < after_at,
                and_(
                    Job.submitted_at == after_at,
                    Job.id < bindparam("after_id", type_=Job.id.type),
                ),
            )
        )
    jobs = query.subquery("page")
    return Read(
        select(jobs, Cluster.name.label("cluster"))
        .select_from(jobs)
        .outerjoin(
            ClusterShare, ClusterShare.placement_id == shown_placement(jobs.c.id, jobs.c.state)
        )
        .outerjoin(Cluster, Cluster.id == ClusterShare.cluster_id)
        .order_by(jobs.c.submitted_at.desc(), jobs.c.id.desc(), ClusterShare.rank_offset)
    )


def shows_clusters(job_state: JobState, placement_state: PlacementState) -> bool:
    """Whether a job in `job_state` shows the clusters of its latest placement (the rule of
    `shown_placement`, for one job already read)."""
    return placement_state is PlacementState.ACTIVE or (
        placement_state is PlacementState.RELEASED and job_state in TERMINAL_JOB_STATES
    )


def shown_placement(job_id: Any, job_state: Any) -> Any:
    """The placement whose clusters a job shows (lists, `--cluster`, kubectl): the one it
    holds, else, once the job has finished, its last run's (released) - so a finished job
    still says where it ran. A job waiting again after an eviction shows none."""
    return (
        select(Placement.id)
        .where(
            Placement.job_id == job_id,
            or_(
                Placement.state == PlacementState.ACTIVE,
                and_(
                    Placement.state == PlacementState.RELEASED,
                    job_state.in_(sorted(TERMINAL_JOB_STATES)),
                ),
            ),
        )
        .order_by((Placement.state == PlacementState.ACTIVE).desc(), Placement.created_at.desc())
        .limit(1)
        .correlate_except(Placement)
        .scalar_subquery()
    )


_JOB = Read(
    select(*Job.__table__.c, Queue.name.label("queue_name"))
    .join(Queue, Queue.id == Job.queue_id)
    .where(Job.id == bindparam("uid", type_=Job.id.type))
)
_SHARE_KEYS = ("cluster", "pods", "gpus", "units", "rank_offset", "domains", "phase", "message")


def _share(row: Row, job_model: str | None) -> dict[str, Any]:
    """A share as the API shows it; its GPU model the job's where it stored none (written
    before revision 0030)."""
    return {**{k: row[k] for k in _SHARE_KEYS}, "gpu_model": row["gpu_model"] or job_model}


_LATEST = (
    select(Placement.id)
    .where(Placement.job_id == bindparam("job_id", type_=Placement.job_id.type))
    .order_by((Placement.state == PlacementState.ACTIVE).desc(), Placement.created_at.desc())
    .limit(1)
    .scalar_subquery()
)
_LATEST_PLACEMENT = Read(
    select(
        Placement.id.label("placement_id"),
        Placement.generation,
        Placement.state.label("placement_state"),
        Placement.created_at,
        Cluster.name.label("cluster"),
        ClusterShare.pods,
        ClusterShare.gpus,
        ClusterShare.units,
        ClusterShare.rank_offset,
        ClusterShare.domains,
        ClusterShare.phase,
        ClusterShare.message,
        ClusterShare.staging,
        ClusterShare.gpu_model,
    )
    .outerjoin(ClusterShare, ClusterShare.placement_id == Placement.id)
    .outerjoin(Cluster, Cluster.id == ClusterShare.cluster_id)
    .where(Placement.id == _LATEST)
    .order_by(ClusterShare.rank_offset)
)
_END_A, _END_B = aliased(Cluster), aliased(Cluster)
_RESERVATIONS = Read(
    select(
        _END_A.name.label("cluster_a"),
        _END_B.name.label("cluster_b"),
        LinkReservation.gbps,
        LinkReservation.staging_share_id.is_not(None).label("staging"),
    )
    .join(Link, Link.id == LinkReservation.link_id)
    .join(_END_A, _END_A.id == Link.cluster_a_id)
    .join(_END_B, _END_B.id == Link.cluster_b_id)
    .where(
        LinkReservation.placement_id
        == bindparam("placement_id", type_=LinkReservation.placement_id.type)
    )
    .order_by(_END_A.name, _END_B.name)
)


def _encode_cursor(row: Mapping[str, Any]) -> str:
    raw = json.dumps([row["submitted_at"].isoformat(), str(row["id"])]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(token: str) -> tuple[datetime, uuid.UUID]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        submitted_at, last_id = json.loads(raw)
        return in_time(datetime.fromisoformat(submitted_at)), uuid.UUID(last_id)
    except (ValueError, TypeError, OverflowError):
        raise Invalid.one("continue", "invalid continue token") from None
