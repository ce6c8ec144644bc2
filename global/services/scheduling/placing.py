"""Writing a placement: its shares and link reservations (what it holds), then its dispatch
(`mark_placed`: the assignments the agents receive, the job Placed). A round does both at once; a
preemptor's placement is written when its victims are evicted and dispatched once they are
gone (`evictions.py`)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.models import (
    ClusterShare,
    Job,
    JobState,
    LinkReservation,
    Placement,
    Queue,
)
from volcano_global.services.events import record_event
from volcano_global.services.jobs.measurements import issue_job_token
from volcano_global.services.lifecycle.jobs import transition
from volcano_global.services.lifecycle.outbox import enqueue_assignments
from volcano_global.solver import JobDecision, Share


def write_shares(
    session: AsyncSession,
    *,
    shares: Sequence[Share],
    placement: Placement,
    cluster_ids: dict[str, uuid.UUID],
) -> list[ClusterShare]:
    """The placement's shares, ranks in the order given."""
    rows, offset = [], 0
    for share in shares:
        row = ClusterShare(
            placement_id=placement.id,
            cluster_id=cluster_ids[share.cluster],
            pods=share.pods,
            gpus=share.gpus,
            units=share.units,
            rank_offset=offset,
            domains=dict(share.domains),
        )
        session.add(row)
        rows.append(row)
        offset += share.pods
    return rows


def write_holdings(
    session: AsyncSession,
    *,
    decision: JobDecision,
    placement: Placement,
    cluster_ids: dict[str, uuid.UUID],
    link_ids: dict[tuple[str, str], uuid.UUID],
) -> tuple[list[ClusterShare], list[str]]:
    """The placement's shares (ranks in the decision's order) and link reservations; returns
    the shares and a line per share and reservation for the Placed event."""
    rows = write_shares(
        session, shares=decision.shares, placement=placement, cluster_ids=cluster_ids
    )
    lines = [f"{share.pods} pods in {share.cluster}" for share in decision.shares]
    for r in decision.reservations:
        key = (r.a, r.b) if (r.a, r.b) in link_ids else (r.b, r.a)
        session.add(LinkReservation(placement_id=placement.id, link_id=link_ids[key], gbps=r.gbps))
        lines.append(f"{r.gbps:g} Gbps on {r.a}<->{r.b}")
    return rows, lines


async def mark_placed(
    session: AsyncSession,
    *,
    job: Job,
    placement: Placement,
    shares: list[ClusterShare],
    queue: Queue | None,
    message: str,
    event: str,
) -> None:
    """Send the placement's shares to their clusters and mark the job Placed (`message`: the
    transition's, `event`: the Placed event's)."""
    token = issue_job_token(session, job=job)
    enqueue_assignments(
        session, job=job, placement=placement, shares=shares, job_token=token, queue=queue
    )
    transition(job, JobState.PLACED, message=message)
    await record_event(
        session,
        job_id=job.id,
        fold=False,  # the round's number makes every Placed message new
        reason="Placed",
        message=event,
    )
