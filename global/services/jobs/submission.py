"""Submitting a job through the unified job API: the document checked (without the database)
and stored with its Submitted event in the job writer's next batch."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.base import utcnow
from volcano_global.db.models import JobState, Queue
from volcano_global.errors import Conflict, Forbidden, Invalid
from volcano_global.jobspec import NormalizedJob, ParseOptions, load_document, normalize_job
from volcano_global.jobspec.tenancy import TenancyRules, tenancy_refusals
from volcano_global.services.events import event_row
from volcano_global.services.jobs import names
from volcano_global.services.jobs.pending_limits import finished, pending_room
from volcano_global.services.jobs.writer import JobWriter, WriteOutcome, Written
from volcano_global.services.tenancy.queues import find_queue

NOT_YET_SCHEDULED = "waiting for the scheduler's next round"


@dataclass(frozen=True)
class SubmitLimits:
    max_nodes: int
    max_depth: int


@dataclass(frozen=True)
class Submission:
    """A job document as received (submit or preview) and the rules it is checked against."""

    body: bytes
    fmt: str  # "yaml" or "json"
    options: ParseOptions
    limits: SubmitLimits
    default_queue: str
    tenancy: TenancyRules  # what each queue's jobs may do in a member cluster
    allowed_queues: tuple[str, ...] | None = None  # a queue user's queues; None: any
    # The fingerprint `options` and `tenancy` were read under: if set, the job is written
    # only if it is still current (else RulesMoved).
    rules_mark: str | None = None


class RulesMoved(Exception):
    """The priority classes or queues the submission was checked against changed before it
    was written: nothing was written; check it again against the rules now."""


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
    # A misspelt queue is named as such, not as a namespace the queue may not use. The rules
    # hold every queue they were read with (a queue newer than them: the caller reads them
    # again on Invalid and checks the job anew).
    if queue_name not in submission.tenancy.annotations:
        raise _no_queue(job, queue_name)
    refuse_outside_tenancy(document, job, queue_name, submission.tenancy)
    return document, job, queue_name


def refuse_outside_tenancy(
    document: dict[str, Any], job: NormalizedJob, queue_name: str, rules: TenancyRules
) -> None:
    """Forbidden, naming every rule broken, if the job would reach past what its queue may
    do in a member cluster (whoever submits it: the queue's grants decide)."""
    refusals = tenancy_refusals(
        document,
        namespace=job.namespace,
        priority_class=job.priority_class_name,
        policy=rules.policy(queue_name),
        rules=rules,
    )
    if refusals:
        raise Forbidden(
            f"queue {queue_name!r} may not run this job in a member cluster: "
            + "; ".join(str(r) for r in refusals)
        )


async def parse_submission(
    session: AsyncSession, submission: Submission
) -> tuple[dict[str, Any], NormalizedJob, Queue]:
    """As `read_submission`, with the queue read (Invalid if it does not exist)."""
    document, job, queue_name = read_submission(submission)
    queue = await find_queue(session, name=queue_name)
    if queue is None:
        raise _no_queue(job, queue_name)
    return document, job, queue


def _queue_field(job: NormalizedJob) -> str:
    return "spec.queue" if job.kind == "Job" else "spec.replicatedJobs[0].templateSpec.queue"


def _no_queue(job: NormalizedJob, queue_name: str) -> Invalid:
    return Invalid.one(_queue_field(job), f"queue {queue_name!r} does not exist")


async def submit_job(
    submission: Submission,
    *,
    submitted_by: str,
    writer: JobWriter,
    events: Sequence[dict[str, Any]] = (),
    check_name: Callable[[str, str], Awaitable[None]] | None = None,
    refuse_finished: bool = False,
) -> dict[str, Any]:
    """Check the submission, then store the job with its Submitted event and `events` (rows
    from `event_row`, e.g. the call's audit record) in the writer's next batch, which also
    looks its queue up (no session of the caller's is held meanwhile: SQLite has one
    connection, which the writer needs). `refuse_finished`: a finished job not deleted holding
    the name refuses it (Conflict), checked in the writer's batch. Raises RulesMoved if the
    submission carries a rules mark that is no longer current. Returns the stored row (every
    column of the jobs table and `queue_name`, as `jobs/views.py` reads it)."""
    document, job, queue_name = read_submission(submission)
    if check_name is not None:  # (namespace, name): e.g. the Kubernetes API's name check
        await check_name(job.namespace, job.name)
    values = _job_row(submission, document, job, submitted_by=submitted_by)
    split = "may be split" if job.split_policy.mode == "auto" else "runs in one cluster"
    submitted = event_row(
        job_id=values["id"],
        reason="Submitted",
        message=f"{job.kind} with {job.gang.total_pods} pods / {job.gang.total_gpus} GPUs "
        f"submitted to queue {queue_name} by {submitted_by}; {split}",
    )
    async with pending_room(writer, queue_name, len(submission.body)):
        written = await finished(
            writer.enqueue(
                values,
                [submitted, *events],
                queue=queue_name,
                refuse_finished=refuse_finished,
                rules_mark=submission.rules_mark,
            )
        )
    _refuse_unwritten(written, job, queue_name)
    return values | {"queue_name": queue_name}


def _job_row(
    submission: Submission, document: dict[str, Any], job: NormalizedJob, *, submitted_by: str
) -> dict[str, Any]:
    """Every column of the new job's row but its queue id (the writer's batch sets it)."""
    lifecycle = job.lifecycle
    now = utcnow()
    return {
        "id": uuid.uuid4(),
        "name": job.name,
        "namespace": job.namespace,
        "kind": job.kind,
        "api_version": job.api_version,
        "priority": job.priority,
        "priority_class_name": job.priority_class_name,
        "preemption_policy": job.preemption_policy,
        "source": submission.body.decode("utf-8"),
        "source_format": submission.fmt,
        "manifest": document,
        # Stored by their column types (db/types.StoredModel), returned as the models.
        "gang": job.gang,
        "communication": job.communication,
        "split_policy": job.split_policy,
        "preemptable": job.preemptable,
        "total_pods": job.gang.total_pods,
        "total_gpus": job.gang.total_gpus,
        "gpu_model": job.gang.gpu_model,
        "running_estimate_seconds": lifecycle.running_estimate_seconds,
        "lifecycle_policies": lifecycle.policies,
        "max_retry": lifecycle.max_retry,
        "gang_start_timeout_seconds": lifecycle.gang_start_timeout_seconds,
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


def _refuse_unwritten(written: Written, job: NormalizedJob, queue_name: str) -> None:
    """The error that tells the submitter why the writer did not store the job, if it did not:
    RulesMoved (check it again), or the refusal the client sees."""
    outcome = written.outcome
    if outcome is WriteOutcome.STALE_RULES:
        raise RulesMoved()
    if outcome is WriteOutcome.NO_QUEUE:
        raise _no_queue(job, queue_name)
    if outcome is WriteOutcome.QUEUE_CLOSED:
        raise Conflict(
            f"queue {queue_name!r} is Closed: it accepts no new jobs (its jobs keep running)"
        )
    if outcome is WriteOutcome.NOT_LEAF:
        raise Invalid.one(
            _queue_field(job),
            f"queue {queue_name!r} has child queues: jobs may be submitted only to leaf queues",
        )
    if outcome is WriteOutcome.FINISHED_HOLDER:
        raise names.finished_holder(job.namespace, job.name, written.holder_state)
    if outcome is WriteOutcome.NAME_TAKEN:
        raise names.unfinished_holder(job.namespace, job.name)
