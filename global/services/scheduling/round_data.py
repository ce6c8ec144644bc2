"""What a round on the server reads of data (step 0, `round_input.read_round`): the copies on
their way, what the window's jobs read and where it is (their DataNeeds), the clusters'
regions, and where copies may not go. DB reads only."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.models import Cluster, ClusterShare, Placement
from volcano_global.db.models.placements import HOLDING
from volcano_global.rpc.shares import StagingItem
from volcano_global.services.data import data_needs, replicas
from volcano_global.services.data.copies import copying as running_copies
from volcano_global.services.data.copy_backoff import barred, broken_destinations
from volcano_global.solver.data import CHECKPOINT, DataNeeds
from volcano_global.solver.round_plan import RoundInput, Waiting


async def with_copies(
    session: AsyncSession, data: RoundInput, copying: dict[str, tuple[str, ...]]
) -> RoundInput:
    """A round with data to place: the copies on their way (read before the data's
    locality, `read_round`), the regions, and where copies may not go."""
    broken = await broken_destinations(session, now=data.now)
    return replace(
        data,
        copying=copying,
        regions=await _regions(session),
        no_prefetch=await _no_prefetch(session, data.data, data.now),
        no_copies_into=broken.barred,
        probe_copies_into=broken.probe,
    )


async def with_popularity(
    session: AsyncSession, data: RoundInput, *, reads_window_s: float
) -> RoundInput:
    """A round that may plan replicas (`DataOptions.replicate_readers`): how much each dataset
    was read within the window (`replicas.popularity`), and where replicas of it (or of what
    the window's jobs read) do not go now (`replicas.barred_replicas`)."""
    since = data.now - timedelta(seconds=reads_window_s)
    popular = await replicas.popularity(session, since=since)
    read = {d.name for need in data.data.values() for d in need.datasets} | set(popular)
    barred = await replicas.barred_replicas(session, now=data.now, names=read)
    return replace(data, popularity=popular, no_replicas=barred)


async def waiting_needs(session: AsyncSession, waiting: list[Waiting]) -> dict[str, DataNeeds]:
    """What the window's jobs read (`services.data.data_needs`: claims bound now, so one
    applied while its job waits counts here), by the requests' ids; jobs that read nothing
    are left out."""
    return await needs_of(session, [uuid.UUID(w.request.id) for w in waiting])


async def needs_of(session: AsyncSession, job_ids: list[uuid.UUID]) -> dict[str, DataNeeds]:
    needs = await data_needs(session, job_ids=job_ids)
    return {str(job_id): need for job_id, need in needs.items() if not need.empty}


async def copying(session: AsyncSession) -> dict[str, tuple[str, ...]]:
    """The data on its way: each data source a holding placement's share is still copying in
    (its staging not ended), or a copy that belongs to no share is (`data_copies`), and where
    to - a round does not copy it there a second time."""
    rows = await session.execute(
        select(ClusterShare.staging, Cluster.name)
        .join(Placement, Placement.id == ClusterShare.placement_id)
        .join(Cluster, Cluster.id == ClusterShare.cluster_id)
        .where(
            Placement.state.in_(HOLDING),
            ClusterShare.staging.is_not(None),
            ClusterShare.staged_at.is_(None),
        )
    )
    found = await running_copies(session)
    for staging, cluster in rows.all():
        for item in staging or ():
            name = StagingItem.from_payload(item).data_source
            if name != CHECKPOINT:  # each job's own (`copying`)
                found.setdefault(name, set()).add(cluster)
    return {name: tuple(sorted(where)) for name, where in found.items()}


async def _no_prefetch(
    session: AsyncSession, needs: Mapping[str, DataNeeds], now: datetime
) -> dict[str, tuple[str, ...]]:
    """Job id -> the clusters its data is not prefetched into this round (`barred`)."""
    found = await barred(session, job_ids=[uuid.UUID(k) for k in needs], now=now)
    return {str(job_id): tuple(sorted(where)) for job_id, where in found.items()}


REGION_LABELS = ("topology.kubernetes.io/region", "region")  # the first a cluster has


async def _regions(session: AsyncSession) -> dict[str, str]:
    """Cluster -> region, from every cluster's placement labels (where one is set; a cluster
    not Ready may still hold data a copy comes from): copies that leave a region are weighed
    as costing more (`DataOptions.cross_region_margin`)."""
    out = {}
    for name, labels in await session.execute(select(Cluster.name, Cluster.labels)):
        region = next((str(labels[k]) for k in REGION_LABELS if (labels or {}).get(k)), None)
        if region is not None:
            out[name] = region
    return out
