"""What a job's training processes measured, reported through its job token, and what the
scheduler takes from it: the cross-cluster rate the job really needs, and (from the newest
checkpoint they saved) the work an eviction would lose.

Measured: the step time and the bytes each data-parallel replica exchanges in the gradient
all-reduce per step (as the framework counts them). Modelled: that a split's pair of clusters
carries 2V/k of it within the tolerated share of the step (solver/traffic.py). With
measurements, V = 8 x bytes per step and tau = share x measured step time replace the declared
model size and target step time for the job's later placements (after a requeue or restart).
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.base import utcnow
from volcano_global.db.models import Job, Placement, PlacementState, TokenRole
from volcano_global.errors import Conflict, NotFound
from volcano_global.services.tenancy.tokens import issue_token

DEFAULT_SHARE = 0.1  # the tolerated communication share when the job declares none
JOB_TOKEN_LIFETIME = timedelta(days=30)


def issue_job_token(session: AsyncSession, *, job: Job) -> str:
    """A token that may only report measurements for this job (injected into its pods); its
    row is written with the session's next flush."""
    return issue_token(
        session,
        name=f"job {job.namespace}/{job.name}",
        role=TokenRole.JOB,
        job_id=job.id,
        expires_at=utcnow() + JOB_TOKEN_LIFETIME,
    )


async def record_checkpoint(
    session: AsyncSession, *, uid: uuid.UUID, step: int, run_token_issued_at: datetime | None
) -> datetime:
    """The job saved a checkpoint now (the Global's clock: the processes' clocks are not
    trusted). A report for a job that has ended is refused. So is one from a run that has
    ended while a later run holds the job: its job token (`run_token_issued_at`; each
    placement's pods get their own) was issued before the job's active placement was made.
    Its time would count it for the later run, whose work it did not save (an evicted run's
    pods may save one while they terminate, after the job started again elsewhere). A report
    while the job has no active placement (requeued, waiting) is kept, but counts for
    nothing, as it predates the next start (`scheduling.timing`); so is one with no run
    named (an admin's), counted by its time alone."""
    job = await _live(session, uid)
    if run_token_issued_at is not None:
        current = await session.scalar(
            select(func.max(Placement.created_at)).where(
                Placement.job_id == uid, Placement.state == PlacementState.ACTIVE
            )
        )
        if current is not None and run_token_issued_at < current:
            raise Conflict(
                f"job {job.namespace}/{job.name} was placed again after this token's run: a "
                "checkpoint of a run that has ended does not count for the current run"
            )
    job.checkpointed_at, job.checkpoint_step = utcnow(), step
    await session.flush()
    return job.checkpointed_at


async def _live(session: AsyncSession, uid: uuid.UUID) -> Job:
    job = (
        await session.execute(select(Job).where(Job.id == uid).with_for_update(of=Job))
    ).scalar_one_or_none()
    if job is None:
        raise NotFound(f"job {uid} not found")
    if job.is_terminal:
        raise Conflict(f"job {job.namespace}/{job.name} already {job.state}")
    return job


async def _require_run_alive(
    session: AsyncSession, job: Job, run_token_issued_at: datetime | None
) -> None:
    """A job token's run has ended once a placement of its job ended after the token was
    issued (each run's token is issued when its placement is dispatched). Ending a placement
    revokes its run's token, so this refuses what a token issued before that rule still
    reports."""
    if run_token_issued_at is None:  # an admin's report: no run named
        return
    ended = await session.scalar(
        select(func.max(Placement.ended_at)).where(Placement.job_id == job.id)
    )
    if ended is not None and ended >= run_token_issued_at:
        raise Conflict(
            f"job {job.namespace}/{job.name}: this token's run ended at {ended.isoformat()}; "
            "an ended run's measurements are not kept"
        )


async def record(
    session: AsyncSession,
    *,
    uid: uuid.UUID,
    step_time_s: float,
    bytes_per_step: float,
    run_token_issued_at: datetime | None = None,
) -> Job:
    """Fold one report into the job's running figures (an exponentially weighted mean that
    starts as the plain mean, so a few reports settle it and later drift is followed). A
    report of a run that has ended (`run_token_issued_at`: its job token's issue) is refused."""
    job = await _live(session, uid)
    await _require_run_alive(session, job, run_token_issued_at)
    old: dict[str, Any] = job.measurements or {}
    samples = int(old.get("samples", 0)) + 1
    weight = max(1.0 / samples, 0.1)

    def mean(key: str, value: float) -> float:
        return value if key not in old else float(old[key]) + weight * (value - float(old[key]))

    step = mean("stepTimeSeconds", step_time_s)
    moved = mean("bytesPerStep", bytes_per_step)
    plan = job.communication
    share = plan.tolerated_communication_share if plan else DEFAULT_SHARE
    job.measurements = {
        "stepTimeSeconds": step,
        "bytesPerStep": moved,
        "samples": samples,
        "allreduceGbps": measured_allreduce_gbps(moved, step, share),
        "updatedAt": utcnow().isoformat(),
    }
    await session.flush()
    return job


def measured_allreduce_gbps(bytes_per_step: float, step_time_s: float, share: float) -> float:
    """V / tau from measurements: 8 x bytes per step over the share of the measured step."""
    return 8.0 * bytes_per_step / (share * step_time_s) / 1e9
