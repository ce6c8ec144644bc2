"""Dispatch: share assignments and cancellations through the outbox, and the lifecycle the
agents' reports drive. A split job is Running only when every share reports all its pods
started (cross-cluster gang); it Succeeds when every share has; one failed share fails the job
and withdraws the others."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.base import utcnow
from volcano_global.db.models import (
    ClusterShare,
    EventType,
    Job,
    JobState,
    OutboxKind,
    OutboxMessage,
    Placement,
    PlacementState,
)
from volcano_global.services.events import record_event
from volcano_global.services.lifecycle import transition

DEFAULT_DURATION_S = 60.0
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(h|m|s|ms)")


def running_estimate(manifest: dict[str, Any]) -> float:
    """Volcano's `spec.runningEstimate` (a Go duration such as "1h30m") in seconds."""
    spec = manifest.get("spec") or {}
    text = spec.get("runningEstimate")
    if text is None:
        templates = [
            r.get("templateSpec", {}) for r in spec.get("replicatedJobs", []) if isinstance(r, dict)
        ]
        text = next((t.get("runningEstimate") for t in templates if t.get("runningEstimate")), None)
    if not isinstance(text, str):
        return DEFAULT_DURATION_S
    scale = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
    total = sum(float(n) * scale[unit] for n, unit in _DURATION.findall(text))
    return total or DEFAULT_DURATION_S


def enqueue_assignments(
    session: AsyncSession, *, job: Job, placement: Placement, shares: list[ClusterShare]
) -> None:
    duration = running_estimate(job.manifest)
    for share in shares:
        session.add(
            OutboxMessage(
                cluster_id=share.cluster_id,
                placement_id=placement.id,
                kind=OutboxKind.ASSIGN,
                payload={
                    "placement_id": str(placement.id),
                    "generation": placement.generation,
                    "job_uid": str(job.id),
                    "job_name": job.name,
                    "namespace": job.namespace,
                    "pods": share.pods,
                    "rank_offset": share.rank_offset,
                    "world_pods": job.total_pods,
                    "gpus_per_pod": share.gpus // share.pods if share.pods else 0,
                    "gpu_model": job.gpu_model or "",
                    "domains": {k: int(v) for k, v in (share.domains or {}).items()},
                    "duration_seconds": duration,
                    "manifest_json": json.dumps(job.manifest),
                },
            )
        )


async def enqueue_cancellations(
    session: AsyncSession, *, placement: Placement, reason: str, skip: uuid.UUID | None = None
) -> None:
    for share in placement.shares:
        if share.cluster_id != skip:
            session.add(
                OutboxMessage(
                    cluster_id=share.cluster_id,
                    placement_id=placement.id,
                    kind=OutboxKind.CANCEL,
                    payload={
                        "placement_id": str(placement.id),
                        "job_uid": str(placement.job_id),
                        "reason": reason,
                    },
                )
            )


async def undelivered(
    session: AsyncSession, *, cluster_id: uuid.UUID, limit: int = 100
) -> list[OutboxMessage]:
    rows = await session.execute(
        select(OutboxMessage)
        .where(OutboxMessage.cluster_id == cluster_id, OutboxMessage.acked_at.is_(None))
        .order_by(OutboxMessage.created_at, OutboxMessage.id)
        .limit(limit)
    )
    return list(rows.scalars())


async def report(
    session: AsyncSession,
    *,
    cluster_id: uuid.UUID,
    placement_id: uuid.UUID,
    phase: str,
    message: str = "",
) -> None:
    """Apply an agent's report about its share of a placement (idempotent)."""
    kinds = [OutboxKind.CANCEL] if phase == "Cancelled" else [OutboxKind.ASSIGN]
    await session.execute(
        update(OutboxMessage)
        .where(
            OutboxMessage.cluster_id == cluster_id,
            OutboxMessage.placement_id == placement_id,
            OutboxMessage.kind.in_(kinds),
            OutboxMessage.acked_at.is_(None),
        )
        .values(acked_at=utcnow())
    )
    placement = (
        await session.execute(
            select(Placement).where(Placement.id == placement_id).with_for_update()
        )
    ).scalar_one_or_none()
    if placement is None or placement.state is not PlacementState.ACTIVE:
        return  # a report about a withdrawn or finished placement: acknowledged, nothing else
    share = next((s for s in placement.shares if s.cluster_id == cluster_id), None)
    if share is None:
        return
    share.phase, share.reported_at = phase, utcnow()
    job = await session.get(
        Job, placement.job_id, with_for_update={"of": Job}, populate_existing=True
    )
    if job is None or job.is_terminal:
        return
    phases = {s.phase for s in placement.shares}
    where = f"{share.cluster.name}: {phase}" + (f" ({message})" if message else "")
    if phase == "Failed":
        transition(job, JobState.FAILED, message=where)
        await _release(session, placement, job, reason=f"share in {share.cluster.name} failed")
        await record_event(
            session, job_id=job.id, type=EventType.WARNING, reason="ShareFailed", message=where
        )
        return
    if job.state is JobState.PLACED and phases <= {"Accepted", "Running", "Succeeded"}:
        transition(job, JobState.DISPATCHED, message="every share accepted")
        await record_event(
            session, job_id=job.id, reason="Dispatched", message="every cluster accepted its share"
        )
    if job.state is JobState.DISPATCHED and phases <= {"Running", "Succeeded"}:
        transition(job, JobState.RUNNING, message="every share running")
        clusters = ", ".join(s.cluster.name for s in placement.shares)
        await record_event(
            session, job_id=job.id, reason="Running", message=f"all pods started in {clusters}"
        )
    if job.state is JobState.RUNNING and phases == {"Succeeded"}:
        transition(job, JobState.SUCCEEDED, message="every share succeeded")
        placement.state, placement.ended_at = PlacementState.RELEASED, utcnow()
        await record_event(
            session, job_id=job.id, reason="Succeeded", message="every share completed"
        )
    await session.flush()


async def _release(session: AsyncSession, placement: Placement, job: Job, *, reason: str) -> None:
    placement.state, placement.ended_at = PlacementState.RELEASED, utcnow()
    await enqueue_cancellations(session, placement=placement, reason=reason)
    await session.flush()
