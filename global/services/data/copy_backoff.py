"""Where no copy goes now (docs/data.md "Prefetch while waiting"): the backoff after a job's
prefetch into a cluster failed (`barred`), and the clusters copies keep failing into, for
any job (`broken_destinations`), with which failures count against a destination."""

from __future__ import annotations

import re
import uuid
from collections.abc import Collection
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.models import RUNNING_COPY, Cluster, CopyState, DataCopy
from volcano_global.rpc.copies import NAMESPACE_REFUSED

# After a prefetch of a job's data into a cluster fails, none is made there for the job for
# this long, doubled per failure there (a refused namespace would fail every round), at most
# `RETRY_CAP_S`.
RETRY_AFTER_S = 300.0
RETRY_CAP_S = 6 * 3600.0
# A cluster into which copies failed in `BROKEN_AFTER` incidents in a row (since its last
# success, within `BROKEN_WINDOW_S`), for at least 2 jobs (a deleted job's copies: one per
# namespace and data source), gets none for any job, as one job's
# failures bar it for that job: a cluster broken for every job (its copier's image cannot be
# pulled, its volume is full) would otherwise fail one copy per waiting job. Failures within
# `INCIDENT_S` of an incident's first are that incident (copies failing together are one
# cause). 5 min after the third incident, doubled per incident since; then one copy tries
# again (the probe) and the others wait for its end.
BROKEN_AFTER = 3
BROKEN_WINDOW_S = 24 * 3600.0
INCIDENT_S = 60.0
# Failures that say nothing of the destination, left out of that count
# (`says_nothing_of_destination`):
# the cluster was lost for a while (`copies.fail_lost`, whatever its copies were doing), its agent
# refused the copy's namespace (`NAMESPACE_REFUSED`, the job's choice), or the API server
# refused the staging Job for the job's namespace: not there, or one the agent may not
# write in (RBAC's 403 names the namespace; deploy/ grants the namespaces it serves).
_LOST = re.compile(r"cluster \S+ is \S+")
_JOBS_NAMESPACE = re.compile(r'namespaces "[^"]+" not found|is forbidden: .* in the namespace "')


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
    runs or their probe copy runs (a copy into it made since the run's third incident
    began), open to one probe copy once it has ended."""
    ok = (
        select(
            DataCopy.destination_cluster_id.label("cluster_id"),
            func.max(DataCopy.ended_at).label("at"),
        )
        .where(DataCopy.state == CopyState.SUCCEEDED)
        .group_by(DataCopy.destination_cluster_id)
        .subquery()
    )
    rows = await session.execute(
        select(
            Cluster.name,
            DataCopy.job_id,
            DataCopy.namespace,
            DataCopy.data_source,
            DataCopy.ended_at,
            DataCopy.reason,
        )
        .join(Cluster, Cluster.id == DataCopy.destination_cluster_id)
        .outerjoin(ok, ok.c.cluster_id == DataCopy.destination_cluster_id)
        .where(
            DataCopy.state == CopyState.FAILED,
            DataCopy.ended_at > now - timedelta(seconds=BROKEN_WINDOW_S),
            (ok.c.at.is_(None)) | (DataCopy.ended_at > ok.c.at),
        )
        .order_by(DataCopy.ended_at, DataCopy.id)
    )
    failed: dict[str, list[tuple[object, datetime, str]]] = {}
    for name, job_id, namespace, source, ended, reason in rows.all():
        if not says_nothing_of_destination(reason):
            # A deleted job leaves its copies without one (job_id NULL): its retries, one
            # per backoff, are told apart from other jobs' by what they copied, for whom.
            job = job_id or (namespace, source)
            failed.setdefault(name, []).append((job, _aware(ended), reason))
    running = await session.execute(
        select(Cluster.name, DataCopy.created_at)
        .join(Cluster, Cluster.id == DataCopy.destination_cluster_id)
        .where(DataCopy.state.in_(RUNNING_COPY), Cluster.name.in_(list(failed)))
    )
    started: dict[str, list[datetime]] = {}
    for name, created in running.all():
        started.setdefault(name, []).append(_aware(created))
    found = Broken({}, {})
    for name, failures in failed.items():
        began, jobs = _incidents([f[1] for f in failures]), len({f[0] for f in failures})
        incidents = len(began)
        if incidents < BROKEN_AFTER or jobs < 2:
            continue
        last, why = failures[-1][1], failures[-1][2]
        until = last + timedelta(seconds=retry_after(incidents - BROKEN_AFTER + 1))
        said = (
            f"copies into it failed {incidents} times in a row, for {jobs} jobs (the last: {why})"
        )
        if until > now:
            found.barred[name] = f"{said}; none goes there before {until:%H:%M} UTC"
        # A copy made since the bar began is the probe (none other goes there meanwhile),
        # running still: an older copy failing as it runs must not let a second one go.
        elif any(t > began[BROKEN_AFTER - 1] for t in started.get(name, ())):
            found.barred[name] = f"{said}; one copy into it tries again, the others wait for it"
        else:
            found.probe[name] = f"{said}; one copy into it tries again, the others wait for it"
    return found


def says_nothing_of_destination(reason: str) -> bool:
    """Whether a failed copy's reason blames the job's namespace, or the cluster's being
    lost a while: nothing of how copies into the destination fare (see `_LOST`)."""
    return (
        reason.startswith(NAMESPACE_REFUSED)
        or _LOST.fullmatch(reason) is not None
        or _JOBS_NAMESPACE.search(reason) is not None
    )


def _incidents(ended: list[datetime]) -> list[datetime]:
    """When each incident that failures ended at these times (sorted) make began
    (`INCIDENT_S`)."""
    began: list[datetime] = []
    for at in ended:
        if not began or (at - began[-1]).total_seconds() > INCIDENT_S:
            began.append(at)
    return began


def _aware(at: datetime) -> datetime:
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def retry_after(failures: int) -> float:
    """Seconds no prefetch goes where one failed `failures` times."""
    return min(RETRY_AFTER_S * 2 ** min(failures - 1, 32), RETRY_CAP_S)
