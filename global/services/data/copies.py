"""Copies that belong to no share (`data_copies`, docs/data.md "Prefetch while waiting"): what
is on its way (the round reads it, so no copy runs twice into one place), what each cluster's
agent must run or stop, and the ends an agent reports. A copy's link bandwidth is a
`LinkReservation` with its `copy_id`, deleted the moment the copy ends or is stopped; ending
a copy never touches a job's state (a failed prefetch requeues nothing: its job still waits).
The round writes copies (`services/scheduling/prefetch.py`); where none goes now is
`copy_backoff`."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Collection, Mapping

from sqlalchemy import ColumnElement, delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.base import utcnow
from volcano_global.db.models import (
    RUNNING_COPY,
    Cluster,
    ClusterState,
    CopyState,
    DataCopy,
    DataSourceRow,
    EventType,
    Job,
    LinkReservation,
)
from volcano_global.errors import Conflict, NotFound
from volcano_global.rpc.copies import (
    CopyCause,
    CopyPhase,
    CopyStatus,
    DataCopyAssignment,
)
from volcano_global.rpc.shares import StagingItem
from volcano_global.services.data.checkpoints import find_location
from volcano_global.services.data.sources import add_locality, delete_data_source, get_data_source
from volcano_global.services.events import record_event
from volcano_global.services.wakeups import OUTBOX, room_may_have_changed
from volcano_global.solver.data import CHECKPOINT, size_text

log = logging.getLogger(__name__)
# What a stream sends its agent: the copies to run, and those to stop.
SENT = (*RUNNING_COPY, CopyState.STOPPING)
PREFETCH = "prefetch"
REPLICA = "replica"  # a copy of a popular dataset ahead of demand, for no job
REPLICA_NAMESPACE = "volcano-global-data"  # `scheduling.data.replica_namespace`'s default


async def copying(session: AsyncSession) -> dict[str, set[str]]:
    """Data source -> the clusters a running copy takes it to. Not checkpoints: each job's
    is its own, though all are named `checkpoint` (another job's bars nothing)."""
    rows = await session.execute(
        select(DataCopy.data_source, Cluster.name)
        .join(Cluster, Cluster.id == DataCopy.destination_cluster_id)
        .where(DataCopy.state.in_(RUNNING_COPY), DataCopy.data_source != CHECKPOINT)
    )
    found: dict[str, set[str]] = {}
    for name, cluster in rows.all():
        found.setdefault(name, set()).add(cluster)
    return found


async def to_send(session: AsyncSession, *, cluster_id: uuid.UUID) -> list[DataCopy]:
    """The copies the cluster's agent must run (or stop), oldest first."""
    rows = await session.execute(
        select(DataCopy)
        .where(DataCopy.destination_cluster_id == cluster_id, DataCopy.state.in_(SENT))
        .order_by(DataCopy.created_at, DataCopy.id)
    )
    return list(rows.scalars())


async def clusters_to_send(
    session: AsyncSession, *, cluster_ids: Collection[uuid.UUID]
) -> set[uuid.UUID]:
    """Those of the clusters with a copy their agent must run or stop (`to_send`)."""
    rows = await session.scalars(
        select(DataCopy.destination_cluster_id)
        .where(DataCopy.destination_cluster_id.in_(cluster_ids), DataCopy.state.in_(SENT))
        .distinct()
    )
    return set(rows)


async def job_names(session: AsyncSession, rows: Collection[DataCopy]) -> dict[uuid.UUID, str]:
    """The name of each copy's job (its staging Job is `<job name>-stage-<copy id>`)."""
    ids = {c.job_id for c in rows if c.job_id is not None}
    if not ids:
        return {}
    found = await session.execute(select(Job.id, Job.name).where(Job.id.in_(list(ids))))
    return {job_id: name for job_id, name in found.all()}


def assignment(copy: DataCopy, *, job_name: str = "") -> DataCopyAssignment:
    return DataCopyAssignment(
        copy_id=str(copy.id),
        namespace=copy.namespace,
        name=job_name or copy.data_source,
        job_uid=str(copy.job_id or ""),
        item=StagingItem.from_payload(copy.item),
    )


async def apply_report(
    session: AsyncSession, *, cluster_id: uuid.UUID, status: CopyStatus
) -> DataCopy | None:
    """An agent's word on a copy into its cluster. A copy that ended stays ended (reports
    resent after a cut change nothing); a stopped one ends when its agent says so. Success
    puts the data there (`add_locality`); failure is recorded, with its reason and cause, and
    requeues nothing."""
    try:
        key = uuid.UUID(status.copy_id)
    except ValueError:
        return None
    if status.phase.ended:  # an event on its job follows
        found = await _lock_with_jobs(session, DataCopy.id == key)
    else:  # progress writes the copy alone: its job's row is left to the rounds
        query = select(DataCopy).where(DataCopy.id == key).with_for_update(of=DataCopy)
        found = list((await session.execute(query)).scalars())
    copy = found[0] if found else None
    if copy is None or copy.destination_cluster_id != cluster_id:
        log.info("report on copy %s, which this cluster does not run: ignored", status.copy_id)
        return None
    if copy.state not in SENT:
        return copy
    copy.reported_at = utcnow()
    if status.phase is CopyPhase.COPYING:
        if copy.state is CopyState.PENDING:
            copy.state = CopyState.COPYING
        copy.staged_bytes = max(copy.staged_bytes, status.staged_bytes)
        copy.message = status.message or _progress(copy.staged_bytes, copy.bytes)
        return copy
    if status.phase is CopyPhase.SUCCEEDED:
        await _end(session, copy, CopyState.SUCCEEDED, "")
        copy.staged_bytes = copy.bytes
        await _arrived(session, copy)
    elif status.phase is CopyPhase.FAILED:
        # An agent from before causes says none: its words are read once, here.
        cause = status.cause or CopyCause.of_words(status.message)
        await _end(session, copy, CopyState.FAILED, status.message or "failed", cause=cause)
        await _event(session, copy, "PrefetchFailed", f"failed: {copy.reason}", warning=True)
    else:
        await _end(session, copy, CopyState.STOPPED, copy.reason or status.message or "stopped")
    copy.message = status.message
    return copy


async def stop_copies(
    session: AsyncSession,
    *,
    job_ids: Collection[uuid.UUID],
    reason: str,
    keep: Mapping[uuid.UUID, Collection[uuid.UUID]] | None = None,
) -> list[DataCopy]:
    """Stop the running copies made for these jobs (their agents are told; the bandwidth
    returns now), but those into the clusters `keep` names for a job (job -> cluster ids:
    where it was placed, which will read the copy)."""
    if not job_ids:
        return []
    rows = await session.execute(
        select(DataCopy)
        .where(DataCopy.job_id.in_(list(job_ids)), DataCopy.state.in_(RUNNING_COPY))
        .order_by(DataCopy.id)
        .with_for_update(of=DataCopy)
    )
    stopped = []
    for copy in rows.scalars():
        if copy.destination_cluster_id in (keep or {}).get(copy.job_id, ()):  # type: ignore[arg-type]
            continue
        await _end(session, copy, CopyState.STOPPING, reason, ended=False)
        await _event(session, copy, "PrefetchStopped", f"stopped: {reason}")
        stopped.append(copy)
    OUTBOX.wrote(session, [c.destination_cluster_id for c in stopped])
    return stopped


async def stop_cluster_copies(
    session: AsyncSession, *, cluster_id: uuid.UUID, name: str
) -> list[DataCopy]:
    """Before a cluster is deleted (its rows go with it): the running copies into it end
    Stopped (its agent is cut off with it), those from it into other clusters are stopped
    (their agents are told). Returns those still being stopped: their rows must outlive the
    cluster until their agents say the copies stopped, or nothing would tell them."""
    why = f"cluster {name} is being deleted"
    mine = (DataCopy.source_cluster_id == cluster_id) | (
        DataCopy.destination_cluster_id == cluster_id
    )
    found = await _lock_with_jobs(session, mine, DataCopy.state.in_(SENT))
    held = {c.id for c in found}
    others = await session.scalars(select(DataCopy.id).where(mine, DataCopy.state.in_(SENT)))
    if set(others.all()) - held:  # written since the jobs were locked: not stopped here
        raise Conflict(f"copies into or from cluster {name!r} were made meanwhile: delete it again")
    leaving = [c for c in found if c.destination_cluster_id != cluster_id]
    stopping = []
    # While copies from it are being stopped the deletion is refused: the copies into it run
    # on, told nothing, until the pass that deletes it ends them.
    for copy in leaving or found:
        if copy.state is not CopyState.STOPPING:
            await _event(session, copy, "PrefetchStopped", f"stopped: {why}")
        if copy.destination_cluster_id == cluster_id:
            await _end(session, copy, CopyState.STOPPED, copy.reason or why)
            continue
        if copy.state is not CopyState.STOPPING:
            await _end(session, copy, CopyState.STOPPING, why, ended=False)
        stopping.append(copy)
    OUTBOX.wrote(session, [c.destination_cluster_id for c in stopping])
    return stopping


async def fail_copies(session: AsyncSession, *, cluster_id: uuid.UUID, reason: str) -> None:
    """The running copies into a cluster that cannot run them end Failed (`reason`)."""
    rows = await session.execute(
        select(DataCopy)
        .where(DataCopy.destination_cluster_id == cluster_id, DataCopy.state.in_(SENT))
        .with_for_update(of=DataCopy)
    )
    for copy in rows.scalars():
        if copy.state is CopyState.STOPPING:
            await _end(session, copy, CopyState.STOPPED, copy.reason or reason)
        else:
            why = copy.reason or reason
            await _end(session, copy, CopyState.FAILED, why, cause=CopyCause.DESTINATION)


async def supervise_copies(session: AsyncSession) -> list[DataCopy]:
    """The supervision pass over copies: those into a cluster no longer Ready end (`fail_lost`),
    those whose data is in their destination by other means are stopped (`stop_arrived`).
    The jobs of both are locked first, in one id-ordered statement, skipping those another
    transaction holds (a job being cancelled stops its copies itself; the next pass sees what
    is left); then only the copies of the jobs held (or of no job), skipping locked ones. A
    copy held while a job's row is awaited deadlocks with a cancel (it locks the job, then
    its copies)."""
    lost = DataCopy.destination_cluster_id.in_(
        select(Cluster.id).where(Cluster.state != ClusterState.READY)
    )
    arrived = DataCopy.id.in_(await _data_there(session))
    ids = await session.scalars(
        select(DataCopy.job_id).where(DataCopy.state.in_(SENT), lost | arrived).distinct()
    )
    held = await _lock_jobs(session, {i for i in ids.all() if i is not None}, skip_locked=True)
    mine = _of(held)
    ended = await fail_lost(session, lost, mine)
    return ended + await stop_arrived(session, arrived, mine)


async def fail_lost(
    session: AsyncSession, lost: ColumnElement[bool], mine: ColumnElement[bool]
) -> list[DataCopy]:
    """The running copies into a cluster that is no longer Ready (`lost`) end Failed (its
    agent cannot report their end; the bandwidth returns), as a lost cluster's shares end."""
    rows = await session.execute(
        select(DataCopy)
        .where(lost, mine, DataCopy.state.in_(SENT))
        .order_by(DataCopy.id)
        .with_for_update(of=DataCopy, skip_locked=True)
    )
    found = list(rows.scalars())
    for copy in found:
        where = copy.destination_cluster
        why = f"cluster {where.name} is {where.state.value}"
        if copy.state is CopyState.STOPPING:
            await _end(session, copy, CopyState.STOPPED, copy.reason or why)
        else:
            await _end(session, copy, CopyState.FAILED, why, cause=CopyCause.CLUSTER_LOST)
            await _event(session, copy, "PrefetchFailed", f"failed: {why}", warning=True)
    return found


async def stop_arrived(
    session: AsyncSession, arrived: ColumnElement[bool], mine: ColumnElement[bool]
) -> list[DataCopy]:
    """The running copies whose data is in their destination by other means (`arrived`:
    another copy put it there, its agent found it there, or a DataSource applied says so) are
    stopped (`data already in <cluster>`): they would hold bandwidth other copies wait for,
    and copy over data that is there."""
    return await _stop(
        session, arrived, mine, why=lambda c: f"data already in {c.destination_cluster.name}"
    )


async def stop_replicas_of(session: AsyncSession, *, source: str) -> list[DataCopy]:
    """A DataSource deleted: its running replicas stop. Made for no job, nothing else would
    stop them, and they would hold their bandwidth for data no one can read by that name."""
    return await _stop(
        session,
        DataCopy.data_source == source,
        DataCopy.purpose == REPLICA,
        why=lambda _: f"its DataSource {source} was deleted",
        skip_locked=False,
    )


async def delete_source(session: AsyncSession, *, name: str) -> DataSourceRow:
    """The DataSource deleted and its running replicas stopped, the copies locked before the
    DataSource as a copy's end locks them (`_arrived`)."""
    await get_data_source(session, name=name)  # a missing name is told before anything
    await stop_replicas_of(session, source=name)
    return await delete_data_source(session, name=name)


async def _stop(
    session: AsyncSession,
    *where: ColumnElement[bool],
    why: Callable[[DataCopy], str],
    skip_locked: bool = True,
) -> list[DataCopy]:
    """The running copies `where` holds stopped, each for `why` it says; those another
    transaction holds are left to the next pass (`skip_locked`)."""
    rows = await session.execute(
        select(DataCopy)
        .where(*where, DataCopy.state.in_(RUNNING_COPY))
        .order_by(DataCopy.id)
        .with_for_update(of=DataCopy, skip_locked=skip_locked)
    )
    found = list(rows.scalars())
    for copy in found:
        reason = why(copy)
        await _end(session, copy, CopyState.STOPPING, reason, ended=False)
        await _event(session, copy, "PrefetchStopped", f"stopped: {reason}")
    OUTBOX.wrote(session, [c.destination_cluster_id for c in found])
    return found


async def _data_there(session: AsyncSession) -> list[uuid.UUID]:
    """The running copies whose data's DataSource lists their destination. Not a
    checkpoint's: it has no DataSource."""
    rows = await session.execute(
        select(DataCopy.id, DataCopy.data_source, Cluster.name)
        .join(Cluster, Cluster.id == DataCopy.destination_cluster_id)
        .where(DataCopy.state.in_(RUNNING_COPY), DataCopy.data_source != CHECKPOINT)
    )
    running = rows.all()
    if not running:
        return []
    held = await session.execute(
        select(DataSourceRow.name, DataSourceRow.clusters).where(
            DataSourceRow.name.in_({source for _, source, _ in running})
        )
    )
    holders = {name: set(clusters or ()) for name, clusters in held.all()}
    return [i for i, source, where in running if where in holders.get(source, ())]


async def list_copies(
    session: AsyncSession, *, running: bool = True, job_ids: Collection[uuid.UUID] | None = None
) -> list[DataCopy]:
    """Copies (running ones, or every one of `job_ids`), oldest first."""
    query = select(DataCopy).order_by(DataCopy.created_at, DataCopy.id)
    if running:
        query = query.where(DataCopy.state.in_(RUNNING_COPY))
    if job_ids is not None:
        query = query.where(DataCopy.job_id.in_(list(job_ids)))
    return list((await session.execute(query)).scalars())


async def _lock_with_jobs(session: AsyncSession, *where: ColumnElement[bool]) -> list[DataCopy]:
    """The copies `where` says, locked after their jobs (in id order): the order of a job's
    cancel and of the round's commit (jobs, then their copies). A copy locked first would be
    held while its event waits for the job's row (an event's key check), which a cancel holds
    while it waits for the copy: a deadlock on Postgres. A copy of another job written
    between the two reads (a round's commit) is left out (the caller may look for it): its job
    locked after it would be that deadlock again."""
    ids = await session.scalars(
        select(DataCopy.job_id).where(*where, DataCopy.job_id.is_not(None)).distinct()
    )
    jobs = await _lock_jobs(session, {i for i in ids.all() if i is not None})
    rows = await session.execute(
        select(DataCopy).where(*where, _of(jobs)).order_by(DataCopy.id).with_for_update(of=DataCopy)
    )
    return list(rows.scalars())


def _of(jobs: Collection[uuid.UUID]) -> ColumnElement[bool]:
    """A copy of one of these jobs, or of no job."""
    return DataCopy.job_id.is_(None) | DataCopy.job_id.in_(list(jobs))


async def _lock_jobs(
    session: AsyncSession, ids: Collection[uuid.UUID], *, skip_locked: bool = False
) -> set[uuid.UUID]:
    """The jobs' rows locked in id order, as `lifecycle.jobs.lock_jobs` locks them (those
    another transaction holds left out, `skip_locked`)."""
    if not ids:
        return set()
    query = (
        select(Job.id)
        .where(Job.id.in_(list(ids)))
        .order_by(Job.id)
        .with_for_update(of=Job, skip_locked=skip_locked)
    )
    return set((await session.scalars(query)).all())


async def _end(
    session: AsyncSession,
    copy: DataCopy,
    state: CopyState,
    reason: str,
    *,
    ended: bool = True,
    cause: CopyCause | None = None,
) -> None:
    """The copy's state (a failure's `cause`), and its bandwidth returned (a stop returns it
    at once: the agent is told, and a copy for nobody should not keep other jobs' staging
    waiting)."""
    copy.state, copy.reason, copy.cause = state, reason, cause
    if ended:
        copy.ended_at = utcnow()
    await session.execute(delete(LinkReservation).where(LinkReservation.copy_id == copy.id))
    room_may_have_changed(session)


async def _arrived(session: AsyncSession, copy: DataCopy) -> None:
    """The data is in the destination now: its DataSource's locality gains the cluster
    (a job's checkpoint: the job's checkpoint location moves there)."""
    where = copy.destination_cluster.name
    await _event(session, copy, "PrefetchEnded", "done")
    if copy.data_source == CHECKPOINT:
        row = await find_location(session, job_id=copy.job_id) if copy.job_id else None
        if row is not None:
            row.cluster = where
        return
    try:
        await add_locality(session, source=copy.data_source, cluster=where)
    except NotFound:
        log.info("data source %s (declared, no DataSource) is now in %s", copy.data_source, where)


async def _event(
    session: AsyncSession, copy: DataCopy, reason: str, what: str, *, warning: bool = False
) -> None:
    """An event on the copy's job; a replica's (no job) on its destination cluster, its
    reason `Replica...` for `Prefetch...`. A prefetch whose job is gone tells no one."""
    subject: dict[str, uuid.UUID] = {}
    if copy.job_id is not None:
        subject["job_id"] = copy.job_id
    elif copy.purpose == REPLICA:
        subject["cluster_id"] = copy.destination_cluster_id
        reason = "Replica" + reason.removeprefix("Prefetch")
        log.info("replica %s of %s %s", copy.id, copy.data_source, what)
    else:
        return
    await record_event(
        session,
        **subject,
        type=EventType.WARNING if warning else EventType.NORMAL,
        reason=reason,
        message=f"copy of {described(copy)} {what}",
        fold=False,
    )


def described(copy: DataCopy) -> str:
    """`corpus-v3 (1 TiB) from gpu-west to gpu-east at 100 Gbps`."""
    return (
        f"{copy.data_source} ({size_text(copy.bytes)}) from {copy.source_cluster.name} to "
        f"{copy.destination_cluster.name} at {copy.gbps:g} Gbps"
    )


def _progress(staged: int, total: int) -> str:
    if total <= 0:
        return ""
    done = min(staged, total)
    return f"copied {size_text(done)} of {size_text(total)} ({100 * done / total:.0f}%)"
