"""What a round reads for copies of popular datasets ahead of demand (docs/data.md,
"Replication ahead of demand"): how much each dataset was read lately (`popularity`), and
where a replica of it does not go now because one failed there lately (`barred_replicas`)."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Collection
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import JSON, String, and_, func, select, type_coerce
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.models import (
    Cluster,
    CopyState,
    DataCopy,
    DataSourceClaimRow,
    Job,
)
from volcano_global.services.data.copies import REPLICA
from volcano_global.services.data.copy_backoff import retry_after
from volcano_global.services.data.needs import binding, read_sources
from volcano_global.solver.replication import Popularity

# A job told apart from others by its key as stored: no UUID is built per row.
_JOB_KEY = type_coerce(Job.id, String)


async def popularity(session: AsyncSession, *, since: datetime) -> dict[str, Popularity]:
    """Per DataSource: the jobs submitted since `since` (waiting, running or ended) that read
    it, by a claim or their declaration (a job reading it both ways counts once; one that
    reads it remotely, `readGbps`, not at all), with its size and holders. Three reads
    whatever the number of jobs: the claims' jobs, the declarations' datasets (not the
    documents), and the DataSources (an inventory of hundreds of rows)."""
    sources = await read_sources(session)
    if not sources:
        return {}
    readers: dict[str, set[Any]] = defaultdict(set)
    claimed: set[tuple[str, Any]] = set()  # (data source, job): a claim, local or remote
    by_key = binding(sources)
    for system, kind, name, job_id, remote in await _claimed(session, since):
        if (source := by_key.get((system, kind, name))) is not None:
            claimed.add((source.name, job_id))
            if not remote:
                readers[source.name].add(job_id)
    # A claim wins over the job's declaration of the same data (`data_needs`).
    for job_id, datasets in await _declared(session, since):
        for d in datasets if isinstance(datasets, list) else ():
            if not isinstance(d, dict) or d.get("readGbps") is not None or not d.get("name"):
                continue
            if (str(d["name"]), job_id) not in claimed:
                readers[str(d["name"])].add(job_id)
    return {
        s.name: Popularity(len(readers[s.name]), s.size_bytes, tuple(sorted(s.clusters or ())))
        for s in sources
        if readers.get(s.name)
    }


async def _claimed(session: AsyncSession, since: datetime) -> list[Any]:
    """(system, type, name, job id, read remotely) of every claim of a job submitted since
    `since`."""
    rows = await session.execute(
        select(
            DataSourceClaimRow.system,
            DataSourceClaimRow.data_source_type,
            DataSourceClaimRow.data_source_name,
            _JOB_KEY,
            DataSourceClaimRow.read_gbps.is_not(None),
        )
        .join(
            Job,
            and_(
                Job.namespace == DataSourceClaimRow.namespace,
                Job.name == DataSourceClaimRow.workload_name,
                Job.kind == DataSourceClaimRow.workload_kind,
            ),
        )
        .where(Job.submitted_at >= since)
        .distinct()
    )
    return list(rows.all())


async def _declared(session: AsyncSession, since: datetime) -> list[tuple[Any, Any]]:
    """(job id, its declaration's datasets) of the jobs submitted since `since` that declare
    some: the stored JSON's one key as text (NULL where the job declares none, on SQLite as
    on Postgres), not the document read as a model."""
    datasets = type_coerce(Job.communication, JSON)["datasets"].as_string()
    rows = await session.execute(
        select(_JOB_KEY, datasets).where(Job.submitted_at >= since, datasets.is_not(None))
    )
    return [(job, json.loads(text)) for job, text in rows.all()]


async def barred_replicas(
    session: AsyncSession, *, now: datetime, names: Collection[str]
) -> dict[str, tuple[str, ...]]:
    """Data source -> the clusters no replica of it goes into now: those whose agent cannot
    run a copy without a share (`Cluster.runs_copies` False: every data source of `names`),
    and those where one failed within the backoff a job's prefetch gets
    (`copy_backoff.retry_after`, doubled per failure there), so a replica that cannot be made
    is not tried again every round."""
    old = (await session.scalars(select(Cluster.name).where(Cluster.runs_copies.is_(False)))).all()
    found: dict[str, set[str]] = defaultdict(set)
    for name in names if old else ():
        found[name].update(old)
    rows = await session.execute(
        select(DataCopy.data_source, Cluster.name, func.count(), func.max(DataCopy.ended_at))
        .join(Cluster, Cluster.id == DataCopy.destination_cluster_id)
        .where(DataCopy.purpose == REPLICA, DataCopy.state == CopyState.FAILED)
        .group_by(DataCopy.data_source, Cluster.name)
    )
    for source, cluster, count, last in rows.all():
        ended = last if last is None or last.tzinfo else last.replace(tzinfo=UTC)
        if ended is not None and ended + timedelta(seconds=retry_after(count)) > now:
            found[source].add(cluster)
    return {source: tuple(sorted(where)) for source, where in found.items()}
