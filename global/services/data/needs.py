"""What a round reads of data: each job's `DataNeeds` (solver/data.py), from its
DataSourceClaims (bound now, so a claim applied while the job waits counts in the next round),
the datasets and checkpoint its communication declaration names, the stored DataSources'
size and locality, and the newest checkpoint it reported."""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping
from typing import Any

from sqlalchemy import Row, select, tuple_
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.models import DataSourceClaimRow, DataSourceRow, Job, JobCheckpointLocation
from volcano_global.jobspec.model import Communication
from volcano_global.solver.data import CheckpointNeed, DataNeeds, DatasetNeed


async def data_needs(
    session: AsyncSession, *, job_ids: Collection[uuid.UUID]
) -> dict[uuid.UUID, DataNeeds]:
    """Every job of `job_ids` that exists, with what it needs of data (empty `DataNeeds` for a
    job that needs nothing). Four reads whatever the number of jobs; the DataSources are read
    whole (an inventory of hundreds of rows, as queues are)."""
    if not job_ids:
        return {}
    jobs = (
        await session.execute(
            select(Job.id, Job.namespace, Job.name, Job.kind, Job.communication).where(
                Job.id.in_(list(job_ids))
            )
        )
    ).all()
    if not jobs:
        return {}
    keys = {(j.namespace, j.name, j.kind) for j in jobs}
    claims = await _claims(session, keys)
    sources = await read_sources(session)
    locations = {
        row.job_id: row
        for row in (
            await session.execute(
                select(
                    JobCheckpointLocation.job_id,
                    JobCheckpointLocation.cluster,
                    JobCheckpointLocation.size_bytes,
                ).where(JobCheckpointLocation.job_id.in_([j.id for j in jobs]))
            )
        ).all()
    }
    by_name = {s.name: s for s in sources}
    by_key = binding(sources)
    found = {}
    for job in jobs:
        declared = _declaration(job.communication)
        datasets = _claimed(claims.get((job.namespace, job.name, job.kind), []), by_key)
        datasets += _declared(declared, by_name, {d.name for d in datasets})
        found[job.id] = DataNeeds(
            datasets=tuple(datasets),
            checkpoint=_checkpoint(declared, locations.get(job.id)),
        )
    return found


async def read_sources(session: AsyncSession) -> list[Row[Any]]:
    """Every DataSource, by the columns needs are made of (name, system, type, source_name,
    clusters, size_bytes), not the stored documents."""
    rows = await session.execute(
        select(
            DataSourceRow.name,
            DataSourceRow.system,
            DataSourceRow.type,
            DataSourceRow.source_name,
            DataSourceRow.clusters,
            DataSourceRow.size_bytes,
        )
    )
    return list(rows.all())


def binding(sources: Collection[Row[Any]]) -> dict[tuple[str, str, str], Row[Any]]:
    """The DataSource a claim of (system, type, name) binds: where several match, the first by
    name (as the objects show)."""
    ordered = sorted(sources, key=lambda s: s.name, reverse=True)
    return {(s.system, s.type, s.source_name): s for s in ordered}


async def _claims(
    session: AsyncSession, keys: set[tuple[str, str, str]]
) -> dict[tuple[str, str, str], list[Row[Any]]]:
    rows = await session.execute(
        select(
            DataSourceClaimRow.namespace,
            DataSourceClaimRow.name,
            DataSourceClaimRow.system,
            DataSourceClaimRow.data_source_type,
            DataSourceClaimRow.data_source_name,
            DataSourceClaimRow.workload_kind,
            DataSourceClaimRow.workload_name,
            DataSourceClaimRow.read_gbps,
        )
        .where(
            tuple_(
                DataSourceClaimRow.namespace,
                DataSourceClaimRow.workload_name,
                DataSourceClaimRow.workload_kind,
            ).in_(list(keys))
        )
        .order_by(DataSourceClaimRow.name)
    )
    found: dict[tuple[str, str, str], list[Row[Any]]] = {}
    for claim in rows.all():
        key = (claim.namespace, claim.workload_name, claim.workload_kind)
        found.setdefault(key, []).append(claim)
    return found


def _declaration(value: Any) -> Communication | None:
    """The job's stored declaration (a mapping as stored, or already typed)."""
    if value is None or isinstance(value, Communication):
        return value
    return Communication.model_validate(value)


def _claimed(
    claims: list[Row[Any]], by_key: Mapping[tuple[str, str, str], Row[Any]]
) -> list[DatasetNeed]:
    found: list[DatasetNeed] = []
    for claim in claims:
        source = by_key.get((claim.system, claim.data_source_type, claim.data_source_name))
        if any(d.name == (source.name if source else claim.data_source_name) for d in found):
            continue  # two claims of one job for the same data: it reads it once
        found.append(
            DatasetNeed(
                name=source.name if source else claim.data_source_name,
                size_bytes=source.size_bytes if source else None,
                clusters=tuple(source.clusters) if source else (),
                read_gbps=claim.read_gbps,
                source="claim",
                claim=f"{claim.namespace}/{claim.name}",
                bound=source is not None,
            )
        )
    return found


def _declared(
    declared: Communication | None, by_name: Mapping[str, Row[Any]], claimed: set[str]
) -> list[DatasetNeed]:
    """The declaration's datasets no claim named. The stored DataSource's size wins over the
    declared one (it is the inventory's); the declared one stands in when it has none."""
    if declared is None:
        return []
    found = []
    for dataset in declared.datasets:
        if dataset.name in claimed:
            continue
        source = by_name.get(dataset.name)
        size = source.size_bytes if source is not None else None
        found.append(
            DatasetNeed(
                name=dataset.name,
                size_bytes=size if size is not None else dataset.size_bytes,
                clusters=tuple(source.clusters) if source is not None else (),
                read_gbps=dataset.read_gbps,
                source="declaration",
                bound=source is not None,
            )
        )
    return found


def _checkpoint(declared: Communication | None, location: Row[Any] | None) -> CheckpointNeed | None:
    """The newest reported checkpoint (its size, else the declared size), or the declared
    one not yet written anywhere."""
    declared_size = declared.checkpoint.size_bytes if declared and declared.checkpoint else None
    if location is not None:
        size = location.size_bytes if location.size_bytes is not None else declared_size
        return CheckpointNeed(size_bytes=size, cluster=location.cluster)
    if declared_size is not None:
        return CheckpointNeed(size_bytes=declared_size, cluster=None)
    return None
