"""The Global's books bound what a round may place: a cluster never has more free GPUs than
its allocatable GPUs minus the GPUs its shares hold (shares that have not ended, of placements
that hold capacity), whatever its inventory says - and no more free GPUs of a model than its
GPUs of that model minus what the shares of that model hold (a share whose model is unknown,
NULL of a job that names none, counts against the cluster only).

The inventory is the cluster's word and the placements the Global's, and the two travel on
different paths: a share whose pods ended frees its GPUs in an inventory delta before its
report ends the share, and a cluster whose agent restarted empty reports everything free before
reconciliation has let go of the shares it lost. Placing on such GPUs in between would book them
twice (issue 39); the GPUs come back when the report or the reconciliation ends the share."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from sqlalchemy import ColumnElement, func, select, true
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.models import (
    Cluster,
    ClusterGpuCapacity,
    ClusterShare,
    Job,
    Placement,
    PlacementState,
)
from volcano_global.rpc.shares import SharePhase
from volcano_global.solver import ClusterCapacity
from volcano_global.solver.capacity import ClusterPool

ENDED = (SharePhase.SUCCEEDED, SharePhase.FAILED, SharePhase.CANCELLED)


async def within_books(
    session: AsyncSession,
    clusters: Sequence[Cluster],
    states: list[ClusterCapacity],
    *,
    excluding: uuid.UUID | None = None,
) -> list[ClusterCapacity]:
    """`states` (free capacity from the inventory, holds taken) with each cluster's free GPUs
    cut down to what its books leave (`_bounded`): first on the leaves where its shares run,
    then anywhere."""
    ids = [c.id for c in clusters]
    rows = await session.execute(
        select(
            ClusterGpuCapacity.cluster_id,
            ClusterGpuCapacity.gpu_model,
            ClusterGpuCapacity.total_gpus,
        ).where(ClusterGpuCapacity.cluster_id.in_(ids))
    )
    totals: dict[uuid.UUID, dict[str, int]] = defaultdict(dict)
    for cluster_id, model, total in rows.all():
        totals[cluster_id][model] = int(total or 0)
    shares = await _holding_shares(session, ids, excluding)
    return [
        _bounded(state, shares.get(cluster.id, []), totals.get(cluster.id, {}))
        for cluster, state in zip(clusters, states, strict=True)
    ]


def _bounded(state: ClusterCapacity, held: list[Any], totals: dict[str, int]) -> ClusterCapacity:
    """Each model's free GPUs cut to its total less its shares' GPUs, taken from its own
    leaves (in a cluster of several models, a share whose pods are not in the inventory yet
    must not be booked twice because another model's GPUs are busy with pods the Global did
    not place); then the cluster's to its total less all its shares', shares of no known model
    (NULL, and a job that names none) first."""
    by_model: dict[str, list[Any]] = defaultdict(list)
    for share in held:
        if share.gpu_model is not None:
            by_model[share.gpu_model].append(share)
    for model, shares in by_model.items():
        free = sum(leaf.free_gpus for leaf in state.leaves if leaf.gpu_model == model)
        excess = free - (totals.get(model, 0) - sum(s.gpus for s in shares))
        if excess > 0:
            state = _taken(state, shares, excess, model)
    free = sum(leaf.free_gpus for leaf in state.leaves)
    excess = free - (sum(totals.values()) - sum(s.gpus for s in held))
    unknown = [s for s in held if s.gpu_model is None]
    return _taken(state, unknown, excess, None) if excess > 0 else state


async def _holding_shares(
    session: AsyncSession, cluster_ids: list[uuid.UUID], excluding: uuid.UUID | None
) -> dict[uuid.UUID, list[Any]]:
    rows = await session.execute(
        select(
            ClusterShare.cluster_id,
            ClusterShare.gpus,
            ClusterShare.pods,
            ClusterShare.domains,
            share_model(),
        )
        .join(Placement, Placement.id == ClusterShare.placement_id)
        .join(Job, Job.id == Placement.job_id)
        .where(
            Placement.state.in_([PlacementState.ACTIVE, PlacementState.NOMINATED]),
            ClusterShare.phase.not_in(ENDED),
            ClusterShare.cluster_id.in_(cluster_ids),
            Placement.id != excluding if excluding is not None else true(),
        )
    )
    by_cluster: dict[uuid.UUID, list[Any]] = defaultdict(list)
    for row in rows:
        by_cluster[row.cluster_id].append(row)
    return by_cluster


def share_model() -> ColumnElement[str | None]:
    """The GPU model a share's GPUs are of, as a column: its own, or (a share written before
    it had one) its job's. A HyperJob whose children differ has no model of its own: its
    shares' GPUs taken as its job's would come off any leaf of the name, in a cluster of two
    models whose leaves share one the other model's, and leave its own free to a next round."""
    return func.coalesce(ClusterShare.gpu_model, Job.gpu_model).label("gpu_model")


def _taken(
    state: ClusterCapacity, held: list[Any], excess: int, model: str | None
) -> ClusterCapacity:
    """`excess` GPUs taken from the state: pods of the held shares on their own leaves (where
    the GPUs are busy), then single GPUs from any leaf (of `model`, when given)."""
    pool = ClusterPool(state)
    for share in held:
        per_pod = share.gpus // share.pods if share.pods else 0
        for leaf, count in (share.domains or {}).items():
            if excess <= 0 or per_pod == 0:
                break
            pods = min(int(count), -(-excess // per_pod))
            excess -= pool.take_from_leaf(leaf, share.gpu_model, per_pod, pods) * per_pod
    for leaf in pool.leaves:
        if excess <= 0:
            break
        if model is None or leaf.gpu_model == model:
            excess -= pool.take_from_leaf(leaf.name, leaf.gpu_model, 1, excess)
    return pool.state()
