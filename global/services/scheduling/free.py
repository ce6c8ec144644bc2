"""What is free for a round: per cluster, a free-GPU histogram per (leaf domain, model) from
ready, schedulable nodes, less what placements hold before their pods run (and preemptors'
nominations), never more than the Global's books leave free (`books.py`). Read by the round,
again at its commit for the clusters whose inventory moved, and by a nomination's start."""

from __future__ import annotations

import uuid

from sqlalchemy import and_, or_, select, true
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.models import (
    Cluster,
    ClusterShare,
    Job,
    JobState,
    Placement,
    PlacementState,
)
from volcano_global.services.inventory.domain_trees import domain_trees
from volcano_global.services.scheduling.books import share_model, within_books
from volcano_global.services.scheduling.capacity_view import (
    free_states,
    read_histograms,
    solver_state,
)
from volcano_global.solver import ClusterCapacity
from volcano_global.solver.capacity import ClusterPool

NOT_RUNNING_YET = (JobState.PLACED, JobState.DISPATCHED)


async def free_capacity(
    session: AsyncSession,
    clusters: list[Cluster],
    *,
    leaves: set[str] | None = None,
    excluding: uuid.UUID | None = None,
) -> list[ClusterCapacity]:
    """Per cluster: a free-GPU histogram per (leaf domain, model) from ready, schedulable nodes,
    minus the pods of placements that hold capacity before their pods run (and of preemptors'
    nominations). All leaves come from
    the in-memory view brought up to date (`capacity_view.py`); with `leaves` (leaf domain
    names; a cluster's own name for its nodes outside any domain), only those, read afresh.
    `excluding`: a placement whose hold is not subtracted (a nomination about to start).
    Never more than the Global's books leave free (`books.py`)."""
    trees = await domain_trees(session, {c.id: c.inventory_generation for c in clusters})
    if leaves is None:
        states = await free_states(session, clusters, trees)
    else:
        read, sizes = await read_histograms(session, clusters, trees, leaves)
        states = {
            c.id: solver_state(c.name, read.get(c.id, {}), trees[c.id], sizes.get(c.id))
            for c in clusters
        }
    pools: dict[uuid.UUID, ClusterPool] = {}  # the clusters where a share holds capacity
    holding = await session.execute(
        select(ClusterShare, share_model())
        .join(Placement, Placement.id == ClusterShare.placement_id)
        .join(Job, Job.id == Placement.job_id)
        .where(
            or_(
                and_(Placement.state == PlacementState.ACTIVE, Job.state.in_(NOT_RUNNING_YET)),
                Placement.state == PlacementState.NOMINATED,
            ),
            ClusterShare.cluster_id.in_([c.id for c in clusters]),
            Placement.id != excluding if excluding is not None else true(),
        )
    )
    for share, model in holding:
        per_pod = share.gpus // share.pods if share.pods else 0
        if per_pod == 0:
            continue  # a CPU-only share holds no GPUs
        pool = pools.get(share.cluster_id)
        if pool is None:
            pool = pools[share.cluster_id] = ClusterPool(states[share.cluster_id])
        for leaf, count in (share.domains or {}).items():
            pool.take_from_leaf(leaf, model, per_pod, int(count))
    held = [pools[c.id].state() if c.id in pools else states[c.id] for c in clusters]
    return await within_books(session, clusters, held, excluding=excluding)
