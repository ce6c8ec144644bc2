"""Where no copy goes now (docs/data.md "Prefetch while waiting"): the backoff after a job's
prefetch into a cluster failed (`barred`), and the clusters copies keep failing into, for
any job (`broken_destinations`), with which failures count against a destination."""

from __future__ import annotations

import re
import uuid
from collections.abc import Collection
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

from sqlalchemy import case, false, func, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from volcano_global.db.models import RUNNING_COPY, Cluster, CopyState, DataCopy
from volcano_global.rpc.copies import CopyCause
from volcano_global.services.data.copies import REPLICA

# After a prefetch of a job's data into a cluster fails, none is made there for the job for
# this long, doubled per failure there (a refused namespace would fail every round), at most
# `RETRY_CAP_S`.
RETRY_AFTER_S = 300.0
RETRY_CAP_S = 6 * 3600.0
# A cluster copies into which failed in `BROKEN_AFTER` incidents within `BROKEN_WINDOW_S`, in
# a run of failures (since its last success) of at least 2 jobs up to the last of them (a
# job's uid, kept when it is deleted; a copy without one: one per namespace and data
# source), gets none for any job, as one job's failures bar it for that
# job: a cluster broken for every job (its copier's image cannot be pulled, its volume is
# full) would otherwise fail one copy per waiting job. Failures within `INCIDENT_S` of an
# incident's first are that incident (copies failing together are one cause). 5 min after
# the incident that made it broken, doubled per incident since; then one copy tries again
# (the probe) and the others wait for its end. Once broken it stays so until a copy into it
# succeeds: the window only decides when a run becomes a bar, it never lifts one (the bar
# would lift as its first incidents aged out, let one copy per waiting job go, and come back
# 3 failures later, its backoff started over).
BROKEN_AFTER = 3
BROKEN_WINDOW_S = 24 * 3600.0
INCIDENT_S = 60.0
# What counts against the destination (`counted`): failures it caused, and the API server's
# refusals of the job's namespace (not there or being deleted, RBAC's 403) in namespaces a
# copy into it once succeeded in, once those of one kind span `NAMESPACES_SPREAD` of them (a
# namespace that worked and no longer does is the job's; several, the cluster's namespaces or
# the agent's RBAC there). A namespace no copy ever succeeded in there says nothing of the
# cluster (and is not read): an agent may serve some namespaces on purpose (one RoleBinding
# each, deploy/overlays/member-gpu-east/served-namespaces.yaml), and jobs of the others must
# not bar it for all. Never a cluster lost a while (`fail_lost`) nor the agent's refusal of
# a namespace by its name (kube-*, its own: alike in every cluster).
_SPREAD = (CopyCause.FORBIDDEN, CopyCause.NAMESPACE_MISSING)
NAMESPACES_SPREAD = 2
_LOST = re.compile(r"cluster \S+ is \S+")  # `copies.fail_lost`'s reason


class Failure(NamedTuple):
    """A failed copy into a cluster, as the bar reads it."""

    job: object  # the job's uid; without one (a deleted job's): (namespace, data source)
    namespace: str
    cause: CopyCause
    ended: datetime
    reason: str
    served: bool = False  # a copy into the cluster once succeeded in its namespace


class Broken(NamedTuple):
    """Cluster -> why: `barred` get no copy now; `probe` get one, the first job's the round
    plans (`solver.copies.prefetch`; the others are told why none goes there)."""

    barred: dict[str, str]
    probe: dict[str, str]


async def barred(
    session: AsyncSession, *, job_ids: Collection[uuid.UUID], now: datetime
) -> dict[uuid.UUID, set[str]]:
    """Job id -> the clusters its data is not prefetched into now: those whose agent cannot
    run a copy without a share (`Cluster.runs_copies` False), and those where a prefetch of
    its data failed within the backoff (`retry_after`)."""
    if not job_ids:
        return {}
    old = set(
        (await session.scalars(select(Cluster.name).where(Cluster.runs_copies.is_(False)))).all()
    )
    rows = await session.execute(
        select(DataCopy.job_id, Cluster.name, func.count(), func.max(DataCopy.ended_at))
        .join(Cluster, Cluster.id == DataCopy.destination_cluster_id)
        .where(DataCopy.job_id.in_(list(job_ids)), DataCopy.state == CopyState.FAILED)
        .group_by(DataCopy.job_id, Cluster.name)
    )
    found: dict[uuid.UUID, set[str]] = {job_id: set(old) for job_id in job_ids} if old else {}
    for job_id, cluster, count, last in rows.all():
        ended = last if last is None or last.tzinfo else last.replace(tzinfo=UTC)
        if ended is not None and ended + timedelta(seconds=retry_after(count)) > now:
            found.setdefault(job_id, set()).add(cluster)
    return found


async def broken_destinations(session: AsyncSession, *, now: datetime) -> Broken:
    """The clusters copies keep failing into (`BROKEN_AFTER`): barred while their backoff
    runs or their probe copy runs (a copy into it made since the incident that made it
    broken began), open to one probe copy once it has ended."""
    runs = await failure_runs(session)
    running = await session.execute(
        select(Cluster.name, DataCopy.created_at)
        .join(Cluster, Cluster.id == DataCopy.destination_cluster_id)
        .where(DataCopy.state.in_(RUNNING_COPY), Cluster.name.in_(list(runs)))
    )
    started: dict[str, list[datetime]] = {}
    for name, created in running.all():
        started.setdefault(name, []).append(_aware(created))
    found = Broken({}, {})
    for name, run in runs.items():
        failures = counted(run)
        began, jobs = _incidents(failures)
        broke = _broke_at(began, jobs)
        if broke is None:
            continue
        incidents, last = len(began), failures[-1]
        until = last.ended + timedelta(seconds=retry_after(incidents - broke))
        said = (
            f"copies into it failed {incidents} times in a row, for {jobs[-1]} jobs "
            f"(the last: {last.reason})"
        )
        if until > now:
            found.barred[name] = f"{said}; none goes there before {until:%H:%M} UTC"
        # A copy made since the bar began is the probe (none other goes there meanwhile),
        # running still: an older copy failing as it runs must not let a second one go.
        elif any(t > began[broke] for t in started.get(name, ())):
            found.barred[name] = f"{said}; one copy into it tries again, the others wait for it"
        else:
            found.probe[name] = f"{said}; one copy into it tries again, the others wait for it"
    return found


async def failure_runs(session: AsyncSession) -> dict[str, list[Failure]]:
    """Cluster -> the failed copies into it since its last successful one that may count
    against it, oldest first: its own (`destination`), and the API server's refusals of a
    namespace a copy into it once succeeded in (`served`). Refusals of the namespaces never
    served there are not read: they never count, and an agent that serves some namespaces
    on purpose refuses one copy per backoff of each job of the others."""
    ok = (
        select(
            DataCopy.destination_cluster_id.label("cluster_id"),
            func.max(DataCopy.ended_at).label("at"),
        )
        .where(DataCopy.state == CopyState.SUCCEEDED)
        .group_by(DataCopy.destination_cluster_id)
        .subquery()
    )
    success = aliased(DataCopy)
    served = (
        select(success.id)
        .where(
            success.destination_cluster_id == DataCopy.destination_cluster_id,
            success.state == CopyState.SUCCEEDED,
            success.namespace == DataCopy.namespace,
        )
        .exists()
    )
    # A replica from before causes (a rolling upgrade) records failures without one: read
    # whole, by their words (`_cause`).
    unsaid = DataCopy.cause.is_(None)
    rows = await session.execute(
        select(
            Cluster.name,
            func.coalesce(DataCopy.job_uid, DataCopy.job_id),
            DataCopy.namespace,
            DataCopy.data_source,
            DataCopy.purpose,
            DataCopy.cause,
            DataCopy.ended_at,
            DataCopy.reason,
            case((DataCopy.cause.in_(_SPREAD) | unsaid, served), else_=false()),
        )
        .join(Cluster, Cluster.id == DataCopy.destination_cluster_id)
        .outerjoin(ok, ok.c.cluster_id == DataCopy.destination_cluster_id)
        .where(
            DataCopy.state == CopyState.FAILED,
            (DataCopy.cause == CopyCause.DESTINATION)
            | unsaid
            | (DataCopy.cause.in_(_SPREAD) & served),
            (ok.c.at.is_(None)) | (DataCopy.ended_at > ok.c.at),
        )
        .order_by(DataCopy.ended_at, DataCopy.id)
    )
    found: dict[str, list[Failure]] = {}
    for name, uid, namespace, source, purpose, cause, ended, reason, in_served in rows.all():
        # A deleted job's copies keep its uid; those made before migration 0031 (or by a
        # replica from before it) and since deleted keep none: its retries, one per
        # backoff, are told apart from other jobs' by what they copied, for whom. Replicas
        # (for no job) count as one job: failures of replicas alone, of however many
        # datasets, are one job's, and never bar the cluster to every job's copies.
        job = uid or ((REPLICA,) if purpose == REPLICA else (namespace, source))
        cause = cause or _cause(reason)
        failure = Failure(job, namespace, cause, _aware(ended), reason, bool(in_served))
        found.setdefault(name, []).append(failure)
    return found


def _cause(reason: str) -> CopyCause:
    """The cause of a failure recorded without one, by its words: `fail_lost`'s (`cluster
    gpu-a is NotReady`), or an agent's, read as an agent's from before causes is at its
    report (`CopyCause.of_words`)."""
    return CopyCause.CLUSTER_LOST if _LOST.fullmatch(reason) else CopyCause.of_words(reason)


def counted(run: list[Failure]) -> list[Failure]:
    """The failures of a run that count against its destination: its own, and refusals of
    served namespaces spread over `NAMESPACES_SPREAD` of them (`_SPREAD`)."""
    refused = [f for f in run if f.cause in _SPREAD and f.served]
    spread = {
        cause
        for cause in _SPREAD
        if len({f.namespace for f in refused if f.cause is cause}) >= NAMESPACES_SPREAD
    }
    return [f for f in run if f.cause is CopyCause.DESTINATION or (f.cause in spread and f.served)]


def _broke_at(began: list[datetime], jobs: list[int]) -> int | None:
    """The index of the incident that made the run a bar: the first that ends
    `BROKEN_AFTER` incidents within `BROKEN_WINDOW_S`, its failures and those before of at
    least 2 jobs (None: none did). Decided on the run up to it, which later failures do not
    change: once made, a bar lasts until a success ends the run."""
    span = BROKEN_AFTER - 1
    for i in range(span, len(began)):
        within = (began[i] - began[i - span]).total_seconds() <= BROKEN_WINDOW_S
        if within and jobs[i] >= 2:
            return i
    return None


def _incidents(failures: list[Failure]) -> tuple[list[datetime], list[int]]:
    """When each incident the failures (oldest first) make began (`INCIDENT_S`), and how
    many jobs' failures there were up to each, its own included."""
    began: list[datetime] = []
    jobs: list[int] = []
    seen: set[object] = set()
    for failure in failures:
        if not began or (failure.ended - began[-1]).total_seconds() > INCIDENT_S:
            began.append(failure.ended)
            jobs.append(0)
        seen.add(failure.job)
        jobs[-1] = len(seen)
    return began, jobs


def _aware(at: datetime) -> datetime:
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def retry_after(failures: int) -> float:
    """Seconds no prefetch goes where one failed `failures` times."""
    return min(RETRY_AFTER_S * 2 ** min(failures - 1, 32), RETRY_CAP_S)
