"""Cross-cluster gang supervision: a placement either starts everywhere or nowhere.

- A share that cannot start (its agent reports Failed before the job runs, its cluster goes
  NotReady, or not every share runs within the gang start timeout, counted from the end of the
  last share's staging: a share still copying its data is not late) withdraws the whole
  placement: every share is cancelled, its capacity and link bandwidth return, and the job goes
  back to Pending with an event naming the cluster and why.
- A share lost while the job runs (its cluster NotReady: Volcano's `PodEvicted`; its pods
  failed: `PodFailed`) is handled by the job's Volcano `policies`: a Restart* action requeues
  the job (up to `spec.maxRetry`, default 3), AbortJob/TerminateJob fail it, CompleteJob
  completes it. Without a matching policy an evicted share requeues and a failed one fails.
  A share Volcano restarted alone in its cluster (`ShareRestarted`) took a Restart* action
  there already: the job is requeued the same way.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import and_, exists, or_, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import selectinload

from volcano_global.db.base import utcnow
from volcano_global.db.models import (
    Cluster,
    ClusterShare,
    ClusterState,
    EventType,
    Job,
    JobState,
    Placement,
    PlacementState,
)
from volcano_global.jobspec import LifecyclePolicy
from volcano_global.rpc.shares import SharePhase
from volcano_global.services.data import copies
from volcano_global.services.events import record_event
from volcano_global.services.lifecycle.jobs import lifecycle_of, transition
from volcano_global.services.lifecycle.placements import end_placement

REQUEUE = frozenset({"RestartJob", "RestartTask", "RestartPod", "RestartPartition"})
FAIL = frozenset({"AbortJob", "TerminateJob"})
COMPLETE = frozenset({"CompleteJob"})
DEFAULT_ACTION = {"PodEvicted": "RestartJob", "PodFailed": "AbortJob"}
NOT_STARTED = (JobState.PLACED, JobState.DISPATCHED)


@dataclass(frozen=True)
class GangOutcome:
    job: str  # namespace/name
    action: str  # Withdrawn, Requeued, Failed, Completed
    message: str


def start_timeout_s(job: Job, default_s: float) -> float:
    own = lifecycle_of(job).gang_start_timeout_seconds
    return float(own) if own is not None else default_s


def policy_action(policies: Sequence[LifecyclePolicy], event: str) -> str:
    """The action of the first of a job's policies matching `event` (or `*`)."""
    for policy in policies:
        if event in policy.events or "*" in policy.events:
            return policy.action
    return DEFAULT_ACTION[event]


async def withdraw(
    session: AsyncSession,
    *,
    placement: Placement,
    job: Job,
    reason: str,
    message: str,
    revoke_tokens: bool = True,
) -> GangOutcome:
    """Take back a placement that has not started: cancel every share, free what it held,
    and put the job back in the queue. `revoke_tokens=False`: the caller revokes the run's
    job token (`end_placement`)."""
    await end_placement(
        session,
        placement=placement,
        state=PlacementState.WITHDRAWN,
        cancel_reason=message,
        revoke_tokens=revoke_tokens,
    )
    transition(job, JobState.PENDING, message=message)
    job.pending_reason = message
    await record_event(
        session, job_id=job.id, type=EventType.WARNING, reason=reason, message=message
    )
    await session.flush()
    return GangOutcome(f"{job.namespace}/{job.name}", "Withdrawn", message)


async def share_lost(
    session: AsyncSession,
    *,
    placement: Placement,
    job: Job,
    event: str,
    message: str,
    action: str | None = None,
    revoke_tokens: bool = True,
) -> GangOutcome:
    """A share of a job stopped: withdraw if the job had not started, else apply its policy
    (`action`: the one Volcano already took in the share's cluster, instead of the lookup).
    `revoke_tokens=False`: the caller revokes the run's job token (`end_placement`)."""
    if job.state in NOT_STARTED:
        return await withdraw(
            session,
            placement=placement,
            job=job,
            reason="GangWithdrawn",
            message=message,
            revoke_tokens=revoke_tokens,
        )
    lifecycle = lifecycle_of(job)
    action = action or policy_action(lifecycle.policies, event)
    max_retry = lifecycle.max_retry
    name = f"{job.namespace}/{job.name}"
    await end_placement(
        session,
        placement=placement,
        state=PlacementState.RELEASED,
        cancel_reason=message,
        revoke_tokens=revoke_tokens,
    )
    if action in REQUEUE and job.requeues < max_retry:
        job.requeues += 1
        text = f"{message}; {event} -> {action}: requeued (retry {job.requeues}/{max_retry})"
        transition(job, JobState.PENDING, message=text)
        job.pending_reason = text
        outcome = GangOutcome(name, "Requeued", text)
    elif action in COMPLETE:
        text = f"{message}; {event} -> {action}"
        transition(job, JobState.SUCCEEDED, message=text)
        outcome = GangOutcome(name, "Completed", text)
    else:
        why = f"maxRetry ({max_retry}) reached" if action in REQUEUE else action
        text = f"{message}; {event} -> {why}: failed"
        transition(job, JobState.FAILED, message=text)
        outcome = GangOutcome(name, "Failed", text)
    await record_event(
        session, job_id=job.id, type=EventType.WARNING, reason=event, message=outcome.message
    )
    await session.flush()
    return outcome


async def supervise(
    session: AsyncSession, *, default_timeout_s: float, now: datetime | None = None
) -> list[GangOutcome]:
    """One sweep over the active placements (run by the scheduling leader): withdraw gangs
    that did not start in time, act on shares whose cluster is NotReady (and end the copies
    that belong to no share into such a cluster, or stop those whose data is there now)."""
    now = now or utcnow()
    # Copies into a lost cluster end as its shares do; those whose data got there stop.
    await copies.supervise_copies(session)
    due = await _due(session, default_timeout_s=default_timeout_s, now=now)
    if not due:
        return []
    rows = await session.execute(
        select(Placement, Job)
        .join(Job, Job.id == Placement.job_id)
        .where(Placement.id.in_(due), Placement.state == PlacementState.ACTIVE)
        .order_by(Job.submitted_at)
        .options(
            selectinload(Placement.shares)
            .joinedload(ClusterShare.cluster)
            .raiseload(Cluster.capacities)
        )
        .with_for_update(of=[Placement, Job], skip_locked=True)
    )
    outcomes = []
    for placement, job in rows.all():
        lost = [s for s in placement.shares if s.cluster.state is not ClusterState.READY]
        if lost:
            share = lost[0]
            message = (
                f"cluster {share.cluster.name} ({share.pods} pods of this job) is "
                f"{share.cluster.state.value}"
            )
            outcomes.append(
                await share_lost(
                    session, placement=placement, job=job, event="PodEvicted", message=message
                )
            )
            continue
        timeout = start_timeout_s(job, default_timeout_s)
        since = start_clock(job, placement.shares)
        if job.state in NOT_STARTED and since is not None:
            if now - since > timedelta(seconds=timeout):
                outcomes.append(
                    await withdraw(
                        session,
                        placement=placement,
                        job=job,
                        reason="GangTimeout",
                        message=_not_started(placement.shares, timeout),
                    )
                )
    return outcomes


def start_clock(job: Job, shares: Sequence[ClusterShare]) -> datetime | None:
    """When the gang's start timeout began: the job's placement, or the end of the last
    share's staging; None while a share is still Staging (or the job is not placed)."""
    if job.placed_at is None or any(s.phase is SharePhase.STAGING for s in shares):
        return None
    return max([job.placed_at, *(s.staged_at for s in shares if s.staged_at is not None)])


async def _due(
    session: AsyncSession, *, default_timeout_s: float, now: datetime
) -> list[uuid.UUID]:
    """The active placements a sweep may have to act on, read without locking or loading
    them: those with a share on a cluster that is not Ready, and those not started whose
    start timeout has passed - with the default, or with a timeout of their own
    (`gang_start_timeout_seconds`; few jobs carry one, and their rows are checked in full, as
    are those of jobs stored without their lifecycle during a rolling upgrade). A placement
    with a share Staging, or one whose staging ended within the default timeout, is not due by
    the default.
    Placements still within the default timeout, nearly all of the starting ones under load,
    are not read: a sweep every round used to load and lock each of them, with its job and
    shares."""
    on_lost_cluster = (
        select(ClusterShare.placement_id)
        .join(Cluster, Cluster.id == ClusterShare.cluster_id)
        .where(Cluster.state != ClusterState.READY)
    )
    cutoff = now - timedelta(seconds=default_timeout_s)
    # Correlated (by the indexed placement id): looked up only for the late placements.
    staging_or_recently_staged = exists().where(
        ClusterShare.placement_id == Placement.id,
        or_(ClusterShare.phase == SharePhase.STAGING, ClusterShare.staged_at >= cutoff),
    )
    rows = await session.execute(
        select(Placement.id)
        .join(Job, Job.id == Placement.job_id)
        .where(
            Placement.state == PlacementState.ACTIVE,
            or_(
                and_(
                    Job.state.in_(NOT_STARTED),
                    or_(
                        and_(
                            Job.placed_at < cutoff,
                            ~staging_or_recently_staged,
                        ),
                        Job.gang_start_timeout_seconds.is_not(None),
                        Job.max_retry.is_(None),  # stored without its lifecycle: read in full
                    ),
                ),
                and_(
                    Job.state.in_((*NOT_STARTED, JobState.RUNNING)),
                    Placement.id.in_(on_lost_cluster),
                ),
            ),
        )
    )
    return list(rows.scalars())


def _not_started(shares: list[ClusterShare], timeout: float) -> str:
    late = [s for s in shares if s.phase not in (SharePhase.RUNNING, SharePhase.SUCCEEDED)]
    parts = [
        f"{s.cluster.name}: {s.phase}" + (f" ({s.message})" if s.message else "") for s in late
    ]
    return f"not every share started within {timeout:g} s; " + "; ".join(parts)
