"""Jobs: submission through the unified job API, listing, the lifecycle state machine and
cancellation."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Integer, Select, and_, bindparam, or_, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import defer, joinedload, lazyload, raiseload, selectinload
from sqlalchemy.orm.attributes import set_committed_value

from volcano_global.db.base import utcnow
from volcano_global.db.models import (
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
from volcano_global.errors import Conflict, Forbidden, Invalid, NotFound
from volcano_global.jobspec import NormalizedJob, ParseOptions, load_document, normalize_job
from volcano_global.services.events import event_row, record_event
from volcano_global.services.job_writer import JobWriter, Outcome
from volcano_global.services.lifecycle import transition
from volcano_global.services.outbox import enqueue_cancellations
from volcano_global.services.queues import find_queue

NOT_YET_SCHEDULED = "waiting for the scheduler's next round"


@dataclass(frozen=True)
class SubmitLimits:
    max_nodes: int
    max_depth: int


@dataclass(frozen=True)
class JobFilter:
    queue: str | None = None
    state: JobState | None = None
    cluster: str | None = None
    namespace: str | None = None
    name: str | None = None
    text: str | None = None  # in the name or namespace
    queues: tuple[str, ...] | None = None  # only these queues (a queue user's)


@dataclass(frozen=True)
class Submission:
    """A job document as received (submit or preview) and the rules it is checked against."""

    body: bytes
    fmt: str  # "yaml" or "json"
    options: ParseOptions
    limits: SubmitLimits
    default_queue: str
    allowed_queues: tuple[str, ...] | None = None  # a queue user's queues; None: any


def read_submission(submission: Submission) -> tuple[dict[str, Any], NormalizedJob, str]:
    """The document, its normalized gang and its queue's name, checked without the database:
    every bad field refused (Invalid), a queue the caller may not use refused (Forbidden)."""
    limits, allowed_queues = submission.limits, submission.allowed_queues
    document = load_document(
        submission.body,
        fmt=submission.fmt,
        max_nodes=limits.max_nodes,
        max_depth=limits.max_depth,
    )
    job = normalize_job(document, submission.options)
    queue_name = job.queue or submission.default_queue
    if allowed_queues is not None and queue_name not in allowed_queues:
        raise Forbidden(
            f"this token may not submit to queue {queue_name!r} "
            f"(allowed: {', '.join(allowed_queues)})"
        )
    return document, job, queue_name


async def parse_submission(
    session: AsyncSession, submission: Submission
) -> tuple[dict[str, Any], NormalizedJob, Queue]:
    """As `read_submission`, with the queue read (Invalid if it does not exist)."""
    document, job, queue_name = read_submission(submission)
    queue = await find_queue(session, name=queue_name)
    if queue is None:
        raise _no_queue(job, queue_name)
    return document, job, queue


def _no_queue(job: NormalizedJob, queue_name: str) -> Invalid:
    field = "spec.queue" if job.kind == "Job" else "spec.replicatedJobs[0].templateSpec.queue"
    return Invalid.one(field, f"queue {queue_name!r} does not exist")


async def submit_job(
    submission: Submission,
    *,
    submitted_by: str,
    writer: JobWriter,
    events: Sequence[dict[str, Any]] = (),
) -> Job:
    """Check the submission, then store the job with its Submitted event and `events` (rows
    from `event_row`, e.g. the call's audit record) in the writer's next batch, which also
    looks its queue up (no session of the caller's is held meanwhile: SQLite has one
    connection, which the writer needs). Returns the stored job (not attached to a session; its
    queue carries only its id and name)."""
    document, job, queue_name = read_submission(submission)
    now = utcnow()
    values: dict[str, Any] = {
        "id": uuid.uuid4(),
        "name": job.name,
        "namespace": job.namespace,
        "kind": job.kind,
        "api_version": job.api_version,
        "priority": job.priority,
        "priority_class_name": job.priority_class_name,
        "source": submission.body.decode("utf-8"),
        "source_format": submission.fmt,
        "manifest": document,
        "gang": job.gang.model_dump(mode="json", by_alias=True),
        "communication": job.communication.model_dump(mode="json", by_alias=True)
        if job.communication
        else None,
        "split_policy": job.split_policy.model_dump(mode="json", by_alias=True),
        "total_pods": job.gang.total_pods,
        "total_gpus": job.gang.total_gpus,
        "gpu_model": job.gang.gpu_model,
        "state": JobState.PENDING,
        "state_message": "",
        "pending_reason": NOT_YET_SCHEDULED,
        "submitted_by": submitted_by,
        "requeues": 0,
        "measurements": None,
        "submitted_at": now,
        "placed_at": None,
        "dispatched_at": None,
        "started_at": None,
        "finished_at": None,
        "updated_at": now,
    }
    split = "may be split" if job.split_policy.mode == "auto" else "runs in one cluster"
    submitted = event_row(
        job_id=values["id"],
        reason="Submitted",
        message=f"{job.kind} with {job.gang.total_pods} pods / {job.gang.total_gpus} GPUs "
        f"submitted to queue {queue_name} by {submitted_by}; {split}",
    )
    outcome = await writer.add(values, [submitted, *events], queue=queue_name)
    if outcome is Outcome.NO_QUEUE:
        raise _no_queue(job, queue_name)
    if outcome is Outcome.NAME_TAKEN:
        raise Conflict(f"job {job.namespace}/{job.name} already exists and has not finished")
    row = Job(**values)
    row.queue = Queue(id=values["queue_id"], name=queue_name)
    return row


async def lock_jobs(session: AsyncSession, job_ids: list[uuid.UUID]) -> dict[uuid.UUID, Job]:
    """The jobs, locked for the transaction in one statement (in id order, as every locker
    of several jobs must, against deadlocks), as they are now."""
    query = (
        select(Job)
        .where(Job.id.in_(job_ids))
        .order_by(Job.id)
        .options(lazyload(Job.queue))
        .with_for_update(of=Job)
        .execution_options(populate_existing=True)
    )
    return {job.id: job for job in (await session.execute(query)).scalars()}


async def get_job(session: AsyncSession, *, uid: uuid.UUID) -> Job:
    job = await session.get(Job, uid)
    if job is None:
        raise NotFound(f"job {uid} not found")
    return job


async def list_jobs(
    session: AsyncSession, *, filters: JobFilter, limit: int, continue_token: str | None
) -> tuple[list[Job], str | None]:
    """Newest first. Returns a page and the token of the next page (None on the last)."""
    query = _PAGE
    if filters.queue is not None:
        query = query.join(Queue, Queue.id == Job.queue_id).where(Queue.name == filters.queue)
    if filters.state is not None:
        query = query.where(Job.state == filters.state)
    if filters.namespace is not None:
        query = query.where(Job.namespace == filters.namespace)
    if filters.name is not None:
        query = query.where(Job.name == filters.name)
    if filters.queues is not None:
        query = query.where(
            Job.queue_id.in_(select(Queue.id).where(Queue.name.in_(filters.queues)))
        )
    if filters.text:
        pattern = "%" + filters.text.replace("\\", "").replace("%", "").replace("_", "\\_") + "%"
        query = query.where(
            or_(Job.name.like(pattern, escape="\\"), Job.namespace.like(pattern, escape="\\"))
        )
    if filters.cluster is not None:
        holders = (
            select(Placement.job_id)
            .join(ClusterShare, ClusterShare.placement_id == Placement.id)
            .join(Cluster, Cluster.id == ClusterShare.cluster_id)
            .where(Cluster.name == filters.cluster, Placement.state == PlacementState.ACTIVE)
        )
        query = query.where(Job.id.in_(holders))
    if continue_token:
        submitted_at, last_id = _decode_cursor(continue_token)
        query = query.where(
            or_(
                Job.submitted_at < submitted_at,
                and_(Job.submitted_at == submitted_at, Job.id < last_id),
            )
        )
    rows = list((await session.execute(query.limit(_LIMIT), {"limit": limit + 1})).scalars())
    if len(rows) <= limit:
        return rows, None
    page = rows[:limit]
    return page, _encode_cursor(page[-1])


# Built once (building a statement costs more than running a cached one): a page shows
# summaries, so the documents and the other JSON columns stay in the database.
_PAGE: Select[tuple[Job]] = (
    select(Job)
    .options(
        *(
            defer(column)
            for column in (
                Job.source,
                Job.manifest,
                Job.measurements,
                Job.gang,
                Job.split_policy,
                Job.communication,
            )
        )
    )
    .order_by(Job.submitted_at.desc(), Job.id.desc())
)
_LIMIT = bindparam("limit", type_=Integer)


async def cancel_job(session: AsyncSession, *, uid: uuid.UUID, by: str) -> Job:
    """Cancel a job; cancelling a cancelled job changes nothing. Its active placement is
    released, which frees its capacity and link bandwidth."""
    job = await get_job(session, uid=uid)
    if job.state is JobState.CANCELLED:
        return job
    if job.is_terminal:
        raise Conflict(f"job {job.namespace}/{job.name} already {job.state}")
    transition(job, JobState.CANCELLED, message=f"cancelled by {by}")
    job.pending_reason = None
    active = (await active_placements(session, job_ids=[job.id])).get(job.id)
    if active is not None:
        active.state, active.ended_at = PlacementState.RELEASED, utcnow()
        await enqueue_cancellations(session, placement=active, reason=f"cancelled by {by}")
    await record_event(session, job_id=job.id, reason="Cancelled", message=f"cancelled by {by}")
    await session.flush()
    return job


async def latest_placement(session: AsyncSession, *, job_id: uuid.UUID) -> Placement | None:
    """The job's active placement, else its most recent one (withdrawn or released), with its
    shares and their clusters in the same statement; its link reservations are read only when
    it has some (a split: more than one share)."""
    rows = await session.execute(_LATEST_PLACEMENT, {"job_id": job_id})
    placement = rows.unique().scalar_one_or_none()
    if placement is not None:
        reservations = []
        if len(placement.shares) > 1:
            found = await session.execute(_RESERVATIONS, {"placement_id": placement.id})
            reservations = list(found.scalars())
        set_committed_value(placement, "link_reservations", reservations)
    return placement


async def active_placements(
    session: AsyncSession, *, job_ids: list[uuid.UUID]
) -> dict[uuid.UUID, Placement]:
    """For job summaries: the active placements' shares and their clusters (not the link
    reservations)."""
    rows = await session.execute(_ACTIVE_PLACEMENTS, {"job_ids": job_ids})
    return {p.job_id: p for p in rows.scalars()}


# A placement's shares with their clusters, without the clusters' GPU capacities (a statement
# more per page, and what a job is shown with does not use them).
_SHARE_CLUSTER_NAMES = (
    selectinload(Placement.shares).joinedload(ClusterShare.cluster).raiseload(Cluster.capacities)
)
_LATEST_PLACEMENT = (
    select(Placement)
    .where(Placement.job_id == bindparam("job_id"))
    .order_by((Placement.state == PlacementState.ACTIVE).desc(), Placement.created_at.desc())
    .limit(1)
    .options(
        joinedload(Placement.shares).joinedload(ClusterShare.cluster).raiseload(Cluster.capacities),
        lazyload(Placement.link_reservations),  # set by `latest_placement`
    )
)
_RESERVATIONS = (
    select(LinkReservation)
    .where(LinkReservation.placement_id == bindparam("placement_id"))
    .options(
        *(
            joinedload(LinkReservation.link).joinedload(end).raiseload(Cluster.capacities)
            for end in (Link.cluster_a, Link.cluster_b)
        )
    )
)
_ACTIVE_PLACEMENTS = (
    select(Placement)
    .where(
        Placement.job_id.in_(bindparam("job_ids", expanding=True)),
        Placement.state == PlacementState.ACTIVE,
    )
    .options(_SHARE_CLUSTER_NAMES, raiseload(Placement.link_reservations))
)


def _encode_cursor(job: Job) -> str:
    raw = json.dumps([job.submitted_at.isoformat(), str(job.id)]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(token: str) -> tuple[datetime, uuid.UUID]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        submitted_at, last_id = json.loads(raw)
        return datetime.fromisoformat(submitted_at), uuid.UUID(last_id)
    except (ValueError, TypeError):
        raise Invalid.one("continue", "invalid continue token") from None
