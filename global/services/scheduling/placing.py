"""Writing a placement: its shares and link reservations (what it holds), the copies a share
waits for (`write_staging`: its staging items and their link bandwidth), then its dispatch
(`mark_placed`: the assignments the agents receive, the job Placed). A round does all of it
at once; a preemptor's placement is written when its victims are evicted and dispatched once
they are gone (`evictions.py`)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence

from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.models import (
    ClusterShare,
    Job,
    JobState,
    LinkReservation,
    Placement,
    Queue,
)
from volcano_global.jobspec.members import ranks_gpu_model
from volcano_global.rpc.shares import StagingItem
from volcano_global.services.events import record_event
from volcano_global.services.jobs.measurements import issue_job_token
from volcano_global.services.lifecycle.jobs import transition
from volcano_global.services.lifecycle.outbox import enqueue_assignments
from volcano_global.solver import JobDecision, Share
from volcano_global.solver.copies import Copy
from volcano_global.solver.data import CHECKPOINT, size_text

# Where staged data lands in a member cluster: the agent's staging volume is mounted there by
# default (core_agent/kubernetes/staging.py, `mount_path`), and so the job's pods read it.
DATA_ROOT = "/data"


def write_shares(
    session: AsyncSession,
    *,
    job: Job,
    shares: Sequence[Share],
    placement: Placement,
    cluster_ids: dict[str, uuid.UUID],
) -> list[ClusterShare]:
    """The job's placement's shares, ranks in the order given, each with the GPU model its
    pods run on: the one the round packed it on (for a job that names none, the round chose
    it), else the job's, or for a HyperJob whose children differ the one its ranks' children
    ask for - what its assignment tells the agent and the books read."""
    rows, offset = [], 0
    for share in shares:
        row = ClusterShare(
            id=uuid.uuid4(),  # now: a staging reservation names its share before the flush
            placement_id=placement.id,
            cluster_id=cluster_ids[share.cluster],
            pods=share.pods,
            gpus=share.gpus,
            units=share.units,
            rank_offset=offset,
            domains=dict(share.domains),
            gpu_model=share.gpu_model
            or job.gpu_model
            or ranks_gpu_model(job.gang, offset, share.pods),
        )
        session.add(row)
        rows.append(row)
        offset += share.pods
    return rows


def write_holdings(
    session: AsyncSession,
    *,
    job: Job,
    decision: JobDecision,
    placement: Placement,
    cluster_ids: dict[str, uuid.UUID],
    link_ids: dict[tuple[str, str], uuid.UUID],
) -> tuple[list[ClusterShare], list[str]]:
    """The placement's shares (ranks in the decision's order) and link reservations; returns
    the shares and a line per share and reservation for the Placed event."""
    rows = write_shares(
        session, job=job, shares=decision.shares, placement=placement, cluster_ids=cluster_ids
    )
    lines = [f"{share.pods} pods in {share.cluster}" for share in decision.shares]
    for r in decision.reservations:
        key = (r.a, r.b) if (r.a, r.b) in link_ids else (r.b, r.a)
        session.add(LinkReservation(placement_id=placement.id, link_id=link_ids[key], gbps=r.gbps))
        lines.append(f"{r.gbps:g} Gbps on {r.a}<->{r.b}")
    return rows, lines


def write_staging(
    session: AsyncSession,
    *,
    copies: Sequence[Copy],
    placement: Placement,
    shares: Sequence[ClusterShare],
    cluster_ids: dict[str, uuid.UUID],
    link_ids: dict[tuple[str, str], uuid.UUID],
    job_uid: uuid.UUID,
    uris: Mapping[str, str],
) -> list[str]:
    """The round's copies for this start (`RoundPlan.staging`): each on the share in its
    destination cluster as a staging item (what the agent copies before the share starts),
    and its bandwidth as a link reservation of that share, held until its staging ends
    (`dispatch/staging.note_staging`). `uris`: where each DataSource is, when its document
    says. A line per copy for the Placed event."""
    by_cluster = {share.cluster_id: share for share in shares}
    lines = []
    for copy in copies:
        share = by_cluster[cluster_ids[copy.destination]]
        item = staging_item(copy, job_uid=job_uid, uris=uris)
        share.staging = [*(share.staging or ()), item.to_payload()]
        key = (copy.source, copy.destination)
        session.add(
            LinkReservation(
                placement_id=placement.id,
                link_id=link_ids[key if key in link_ids else key[::-1]],
                gbps=copy.gbps,
                staging_share_id=share.id,
            )
        )
        lines.append(
            f"staging {copy.data} ({size_text(copy.bytes)}) from {copy.source} to "
            f"{copy.destination} at {copy.gbps:g} Gbps"
        )
    return lines


def staging_item(copy: Copy, *, job_uid: uuid.UUID, uris: Mapping[str, str]) -> StagingItem:
    """A copy as the agent receives it. Where it lands is a convention the agent's copier
    and the job's pods share (docs/staging.md): `/data/<data source>/` on the staging volume,
    and a job's checkpoint under `/data/checkpoints/<job uid>/` (`$(VGLOBAL_JOB_UID)` in its
    pods), which is also where it is read from in the cluster that holds it."""
    if copy.data == CHECKPOINT:
        path = f"{DATA_ROOT}/checkpoints/{job_uid}/"
        return StagingItem(
            data_source=copy.data,
            bytes=copy.bytes,
            destination=path,
            source_cluster=copy.source,
            source_uri=path,
            gbps=copy.gbps,
        )
    return StagingItem(
        data_source=copy.data,
        bytes=copy.bytes,
        destination=f"{DATA_ROOT}/{copy.data}/",
        source_cluster=copy.source,
        source_uri=uris.get(copy.data, ""),
        gbps=copy.gbps,
    )


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
