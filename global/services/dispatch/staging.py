"""What the Global makes of a share's Staging: its data being copied into the share's cluster
before the share's Volcano Jobs exist. The job's events show the copy start and end; a share
reported past Staging has its data there (the time is kept: the gang's start timeout counts from
it, see supervision.py) and each data source it copied is now in that cluster too. A staging
that fails is an ordinary share failure (reports.py withdraws and requeues the job), named as a
staging failure here."""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass

from sqlalchemy import inspect
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.base import utcnow
from volcano_global.db.models import ClusterShare, EventType, Job, Placement
from volcano_global.errors import NotFound
from volcano_global.rpc.shares import SharePhase, StagingItem
from volcano_global.services.data import add_locality
from volcano_global.services.data.checkpoints import find_location
from volcano_global.services.events import record_event
from volcano_global.solver.data import CHECKPOINT, duration_text, size_text

log = logging.getLogger(__name__)
# Phases that say the copy is over and the share's Volcano Jobs exist.
_STAGED = frozenset({SharePhase.ACCEPTED, SharePhase.RUNNING, SharePhase.SUCCEEDED})


@dataclass(frozen=True)
class DataArrival:
    """A data source now held by a cluster, after a staging to it succeeded."""

    source: str
    cluster: str


async def note_staging(
    session: AsyncSession, *, share: ClusterShare, job: Job, phase: SharePhase, message: str
) -> None:
    """Act on a report about `share` before its phase is stored (`share.phase` is the one
    before the report): the job's events, the end of the copy, the data sources that arrived."""
    before, where = share.phase, share.cluster.name
    if phase is SharePhase.STAGING and before is not SharePhase.STAGING:
        await _event(session, job, "StagingStarted", f"{where}: staging {_described(share)}")
    elif before is SharePhase.STAGING and phase is SharePhase.FAILED:
        await _event(
            session,
            job,
            "StagingFailed",
            f"{where}: staging failed" + (f": {message}" if message else ""),
            warning=True,
        )
    elif phase in _STAGED and share.staging and share.staged_at is None:
        share.staged_at = utcnow()
        await _release_links(session, share)
        await _event(session, job, "StagingEnded", f"{where}: staged {_described(share)}")
        items = _items(share)
        arrivals = [DataArrival(i.data_source, where) for i in items if i.data_source != CHECKPOINT]
        await data_arrived(session, arrivals=arrivals)
        if any(i.data_source == CHECKPOINT for i in items):
            await checkpoint_moved(session, job_id=job.id, cluster=where)


async def data_arrived(session: AsyncSession, *, arrivals: list[DataArrival]) -> None:
    """The one place the Global learns that a cluster now holds a data source: its
    DataSource's locality gains the cluster (`services.data.add_locality`). Data a job only
    declared (no DataSource object names it) has no locality to keep: logged."""
    for arrival in arrivals:
        try:
            await add_locality(session, source=arrival.source, cluster=arrival.cluster)
        except NotFound:
            log.info(
                "data source %s (declared, no DataSource) is now in cluster %s",
                arrival.source,
                arrival.cluster,
            )


async def _release_links(session: AsyncSession, share: ClusterShare) -> None:
    """The share's copies are over: the link bandwidth reserved for them returns (the
    placement's own reservations, a split's, stay). Through the placement's collection, which
    the report's transaction loaded, so that it stays true for the rest of it. A staging that
    fails ends the placement instead, and an ended placement holds no bandwidth."""
    placement = await session.get(Placement, share.placement_id)
    if placement is None:
        return
    if "link_reservations" in inspect(placement).unloaded:
        await session.refresh(placement, ["link_reservations"])
    placement.link_reservations = [
        r for r in placement.link_reservations if r.staging_share_id != share.id
    ]


async def checkpoint_moved(session: AsyncSession, *, job_id: uuid.UUID, cluster: str) -> None:
    """The job's newest checkpoint was staged into `cluster`: a later requeue prefers it
    there (the job runs there now, and its next checkpoints are written there too)."""
    row = await find_location(session, job_id=job_id)
    if row is not None and row.cluster != cluster:
        row.cluster = cluster


def progress_text(staged_bytes: int, staging_bytes: int) -> str:
    """How far a copy is, for the share's message ("" when the agent does not say)."""
    if staging_bytes <= 0:
        return ""
    done = min(staged_bytes, staging_bytes)
    percent = 100 * done / staging_bytes
    return f"staged {size_text(done)} of {size_text(staging_bytes)} ({percent:.0f}%)"


def _items(share: ClusterShare) -> list[StagingItem]:
    return [StagingItem.from_payload(item) for item in share.staging or ()]


def _described(share: ClusterShare) -> str:
    parts = []
    for item in _items(share):
        origin = f" from {item.source_cluster}" if item.source_cluster else ""
        rate = f" at {item.gbps:g} Gbps (about {duration_text(item.seconds)})" if item.gbps else ""
        parts.append(f"{item.data_source} ({size_text(item.bytes)}){origin}{rate}")
    return ", ".join(parts) or "its data"


async def _event(
    session: AsyncSession, job: Job, reason: str, message: str, *, warning: bool = False
) -> None:
    await record_event(
        session,
        job_id=job.id,
        type=EventType.WARNING if warning else EventType.NORMAL,
        reason=reason,
        message=message,
        fold=False,
    )
