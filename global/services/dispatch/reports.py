"""The lifecycle the agents' reports drive. A split job is Dispatched when every share is
accepted, Running only when every share reports all its pods started (cross-cluster gang), and
Succeeded when every share has. A share that fails, or that succeeds before every share has
started (the gang never ran together), is handed to gang supervision: before the job runs the
whole placement is withdrawn and the job requeued; after, the job's policy decides. A share
Volcano restarted alone in its cluster restarts the job everywhere. A share that stages its data
first reports Staging (staging.py): its job stays Placed until every share is accepted, and a
staging that fails withdraws and requeues the job like any share that cannot start."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.orm import selectinload

from volcano_global import failpoints
from volcano_global.db.base import utcnow
from volcano_global.db.engine import is_unavailable, transaction
from volcano_global.db.group_commit import GroupCommit
from volcano_global.db.models import (
    Cluster,
    ClusterShare,
    EventType,
    Job,
    JobState,
    OutboxKind,
    Placement,
    PlacementState,
)
from volcano_global.loop_turns import Turns
from volcano_global.rpc.shares import SharePhase
from volcano_global.services.dispatch.staging import note_staging, progress_text
from volcano_global.services.dispatch.supervision import NOT_STARTED, share_lost
from volcano_global.services.events import record_event
from volcano_global.services.lifecycle import outbox
from volcano_global.services.lifecycle.jobs import lock_jobs, transition
from volcano_global.services.lifecycle.placements import end_placement
from volcano_global.services.tenancy.tokens import revoke_job_tokens

WARNING_PREFIX = "warning: "  # how a share's message shows the agent's warning
# A placement is accepted when every share is in the first set, running in the second. (A share
# that succeeds while another has not started breaks the gang first: Succeeded counts here only
# once every other share runs or is done.)
_ACCEPTED = frozenset({SharePhase.ACCEPTED, SharePhase.RUNNING, SharePhase.SUCCEEDED})
_RUNNING = frozenset({SharePhase.RUNNING, SharePhase.SUCCEEDED})


@dataclass(frozen=True)
class ShareReport:
    """An agent's word on its cluster's share of a placement."""

    cluster_id: uuid.UUID
    placement_id: uuid.UUID
    phase: SharePhase  # any but Assigned
    message: str = ""
    warning: str = ""  # the share runs, but the user should know (a Warning event)
    staged_bytes: int = 0  # Staging: copied so far, of `staging_bytes` (0: not said)
    staging_bytes: int = 0

    @property
    def shown(self) -> str:
        """The share's message as the job shows it: the agent's message, how far its staging
        is, then its warning."""
        warning = f"{WARNING_PREFIX}{self.warning}" if self.warning else ""
        staged = progress_text(self.staged_bytes, self.staging_bytes)
        return "; ".join(part for part in (self.message, staged, warning) if part)


def report_writer(
    sessions: async_sessionmaker[AsyncSession],
) -> GroupCommit[list[ShareReport], None]:
    """The reports of every agent stream of this process, applied together: what the streams
    send while a transaction of reports is written goes in the next one (a transaction's round
    trips are paid once for many reports; one stream's reports stay in its order). A report
    that fails for a reason of its own fails only its stream's batch."""

    async def write(batches: list[list[ShareReport]]) -> list[None]:
        async with transaction(sessions) as session:
            await apply_reports(session, [report for batch in batches for report in batch])
        return [None] * len(batches)

    return GroupCommit(
        write, what="report batches", max_batch=64, alone=lambda exc: not is_unavailable(exc)
    )


async def lock_placements(session: AsyncSession, *where: Any) -> list[Placement]:
    """The placements `where` selects, with their shares, locked in id order (as every writer
    of placements locks them, before their jobs). The shares are read by a second statement,
    once the locks are held: joined to the locking one, Postgres would return them as they
    were when it began, before the lock's previous holder committed (a gang's two shares
    reported Succeeded by two replicas would each see the other still Running)."""
    rows = await session.execute(
        select(Placement)
        .where(*where)
        .order_by(Placement.id)
        .with_for_update(of=Placement)
        .options(
            selectinload(Placement.shares)
            .joinedload(ClusterShare.cluster)
            .raiseload(Cluster.capacities)
        )
    )
    return list(rows.scalars())


async def apply_reports(session: AsyncSession, reports: list[ShareReport]) -> None:
    """Apply agents' reports, in the order given (idempotent). The rows they touch are read
    once for all of them: the dispatch messages they acknowledge, then the placements and then
    their jobs, each locked in id order (one statement each)."""
    if not reports:
        return
    await _acknowledge(session, reports)
    chosen = Placement.id.in_(sorted({r.placement_id for r in reports}))
    placements = {p.id: p for p in await lock_placements(session, chosen)}
    active = [p for p in placements.values() if p.state is PlacementState.ACTIVE]
    jobs = await lock_jobs(session, [p.job_id for p in active], documents=False)
    turns = Turns()  # a batch of many reports is ORM work with nothing to await
    for report in reports:
        await turns.take()
        placement = placements.get(report.placement_id)
        if placement is not None:
            await _apply(session, report, placement, jobs.get(placement.job_id))
    # The runs that ended here: their job tokens revoked together (one statement, not one
    # per job; before the commit, with the rest of the batch).
    ended = [p for p in active if p.state is not PlacementState.ACTIVE]
    if ended:
        await revoke_job_tokens(
            session,
            job_ids=[p.job_id for p in ended],
            ended_at=max(p.ended_at for p in ended if p.ended_at is not None),
        )
    await session.flush()
    failpoints.hit("report-commit")


async def _acknowledge(session: AsyncSession, reports: list[ShareReport]) -> None:
    """A report acknowledges the dispatch messages to its cluster about its share: an
    assignment, or for Cancelled a cancellation."""
    await outbox.acknowledge(
        session,
        delivered={
            (
                r.cluster_id,
                r.placement_id,
                OutboxKind.CANCEL if r.phase is SharePhase.CANCELLED else OutboxKind.ASSIGN,
            )
            for r in reports
        },
    )


async def _apply(
    session: AsyncSession,
    report: ShareReport,
    placement: Placement,
    job: Job | None,
) -> None:
    """One report: its share's phase stored, then what that means for the job: the gang
    broken (`_break_gang`), or the job a step further (`_advance`)."""
    share = await _store(session, report, placement, job)
    if share is None or job is None or job.is_terminal:
        return
    phases = {s.phase for s in placement.shares}
    if report.warning:
        await record_event(
            session,
            job_id=job.id,
            type=EventType.WARNING,
            reason="ClusterWarning",
            message=f"{share.cluster.name}: {report.warning}",
        )
    if await _break_gang(session, report, share, placement, job, phases):
        return
    await _advance(session, placement, job, phases)


async def _store(
    session: AsyncSession, report: ShareReport, placement: Placement, job: Job | None
) -> ClusterShare | None:
    """The report's share with the reported phase stored, or None when the report changes
    nothing: about a withdrawn or finished placement (acknowledged, nothing else), a share
    unknown, or older than the report stored (resent after a newer one)."""
    phase, message = report.phase, report.shown
    if placement.state is not PlacementState.ACTIVE:
        return None
    share = next((s for s in placement.shares if s.cluster_id == report.cluster_id), None)
    if share is None or phase.progress < share.phase.progress:
        return None
    if job is not None and not job.is_terminal:
        await note_staging(session, share=share, job=job, phase=phase, message=message)
    # Restarting is acted on, not stored: replicas of the previous release read the column.
    stored = SharePhase.FAILED if phase is SharePhase.RESTARTING else phase
    share.phase, share.reported_at, share.message = stored, utcnow(), message[:1000]
    return share


async def _break_gang(
    session: AsyncSession,
    report: ShareReport,
    share: ClusterShare,
    placement: Placement,
    job: Job,
    phases: set[SharePhase],
) -> bool:
    """Hand the job to gang supervision if the report breaks its gang; whether it did. The
    run's job token is left to `apply_reports`, which revokes those of every run the batch
    ended in one statement (one here would first flush everything the batch changed so far)."""
    phase, message = report.phase, report.shown
    where = f"{share.cluster.name}: {phase}" + (f" ({message})" if message else "")
    if phase is SharePhase.RESTARTING:
        # Volcano restarted this share's pods alone (a Restart* policy in its cluster): the
        # other clusters' ranks cannot go on with new peers, so the gang restarts everywhere:
        # every share cancelled, the job requeued as the policy said (within maxRetry).
        await share_lost(
            session,
            placement=placement,
            job=job,
            event="ShareRestarted",
            action="RestartJob",
            message=f"share in {where}",
            revoke_tokens=False,
        )
        return True
    if phase in (SharePhase.FAILED, SharePhase.CANCELLED):
        # Cancelled here means the share was removed in its cluster without our asking.
        await share_lost(
            session,
            placement=placement,
            job=job,
            event="PodFailed",
            message=f"share in {where}",
            revoke_tokens=False,
        )
        return True
    if phase is SharePhase.SUCCEEDED and job.state in NOT_STARTED and not phases <= _RUNNING:
        # It ended before every share had started: the gang never ran together (its ranks
        # cannot have met), so the job is not Running: withdrawn and requeued. (Every other
        # share running or done: they all started, even if this one's Running was never seen;
        # a job of one share is Volcano's gang alone.)
        await share_lost(
            session,
            placement=placement,
            job=job,
            event="PodFailed",
            message=f"share in {where} ended before every share started: the gang is broken",
            revoke_tokens=False,
        )
        return True
    return False


async def _advance(
    session: AsyncSession, placement: Placement, job: Job, phases: set[SharePhase]
) -> None:
    """The job Dispatched, Running or Succeeded when every share has got that far."""
    # Each transition happens once per placement: its event is new, not folded into another.
    if job.state is JobState.PLACED and phases <= _ACCEPTED:
        transition(job, JobState.DISPATCHED, message="every share accepted")
        await record_event(
            session,
            job_id=job.id,
            reason="Dispatched",
            message="every cluster accepted its share",
            fold=False,
        )
    if job.state is JobState.DISPATCHED and phases <= _RUNNING:
        transition(job, JobState.RUNNING, message="every share running")
        clusters = ", ".join(s.cluster.name for s in placement.shares)
        await record_event(
            session,
            job_id=job.id,
            reason="Running",
            message=f"all pods started in {clusters}",
            fold=False,
        )
    if job.state is JobState.RUNNING and phases == {SharePhase.SUCCEEDED}:
        transition(job, JobState.SUCCEEDED, message="every share succeeded")
        await end_placement(
            session,
            placement=placement,
            state=PlacementState.RELEASED,
            cancel_reason=None,
            revoke_tokens=False,  # by `apply_reports`, for the whole batch
        )
        await record_event(
            session,
            job_id=job.id,
            reason="Succeeded",
            message="every share completed",
            fold=False,
        )
