"""From a normalized job (the unified job API) to the solver's `JobRequest`."""

from __future__ import annotations

import math

from volcano_global.jobspec import Communication, Gang, SplitPolicy, TaskGang
from volcano_global.solver.model import JobRequest
from volcano_global.solver.traffic import allreduce_gbps


def job_request(
    *,
    job_id: str,
    gang: Gang,
    split: SplitPolicy,
    communication: Communication | None,
    priority: int,
    queue: str,
    may_evict_for: frozenset[str] = frozenset(),
    served_gpu_s: float = 0.0,
) -> JobRequest:
    """The gang as the solver sees it. Raises ValueError for shapes the solver does not model
    yet (GPU pods of different sizes in one job; HyperJob children of different sizes).
    `served_gpu_s`: what its earlier runs received (time-sharing)."""
    # A task of replicas 0 runs no pod: its pod size and model do not count.
    gpu_tasks = [t for t in gang.tasks if t.resources.gpus and t.replicas]
    sizes = {t.resources.gpus for t in gpu_tasks}
    if len(sizes) > 1:
        raise ValueError(f"GPU pods of different sizes {sorted(sizes)}")
    gpus_per_pod = sizes.pop() if sizes else 0
    pods = sum(t.replicas for t in gpu_tasks) if gpu_tasks else gang.total_pods
    models = {t.gpu_model for t in gpu_tasks}
    if len(models) > 1:
        raise ValueError(f"parts on different GPU models {sorted(m or '?' for m in models)}")
    named = [s.cluster_names for s in gang.sub_jobs]
    allowed = tuple(sorted({c for names in named for c in names})) if named and all(named) else None
    if gang.sub_jobs and split.unit == "subJob":
        child_pods = {s.pods for s in gang.sub_jobs}
        if len(child_pods) > 1:
            raise ValueError(f"HyperJob children of different sizes {sorted(child_pods)}")
        pods = sum(s.pods * s.replicas for s in gang.sub_jobs)
        unit = child_pods.pop()
    else:
        # A Job, or a HyperJob whose one replicated job is split automatically (its pool); an
        # elastic job is placed in its units, split or not.
        unit = split.unit_pods if split.mode == "auto" or split.min_units else 0
    unit, unit_tier = _unit_tier(gpu_tasks, unit)
    share_tier = _share_tier(gang)
    if split.crossing_gbps is not None:
        rate = split.crossing_gbps
    else:
        rate = allreduce_gbps(communication) if communication is not None else 0.0
    unit = unit if unit and pods % unit == 0 else 0
    return JobRequest(
        id=job_id,
        pods=pods,
        gpus_per_pod=gpus_per_pod,
        gpu_model=gang.gpu_model,
        unit_pods=unit,
        priority=priority,
        queue=queue,
        splittable=split.mode == "auto",
        max_clusters=split.max_clusters,
        min_share_units=max(1, math.ceil(split.min_share_pods / unit)) if unit else 1,
        unit_tier=unit_tier,
        share_tier=share_tier,
        allreduce_gbps=rate,
        allowed_clusters=allowed,
        min_units=split.min_units if unit and split.min_units * unit < pods else 0,
        may_evict_for=may_evict_for,
        served_gpu_s=served_gpu_s,
    )


def _unit_tier(gpu_tasks: list[TaskGang], unit: int) -> tuple[int, int | None]:
    """A hard partition topology's tier and, when the job names no unit of its own, its
    partition size as the unit."""
    unit_tier = None
    for task in gpu_tasks:
        topology = task.partition.network_topology if task.partition else None
        if (
            topology is not None
            and topology.mode == "hard"
            and topology.highest_tier_allowed is not None
        ):
            unit_tier = _known_tier(topology.highest_tier_allowed)
            unit = unit or task.partition.partition_size  # type: ignore[union-attr]
    return unit, unit_tier


def _share_tier(gang: Gang) -> int | None:
    """The tier a share must stay within: the job's hard network topology, if any."""
    share = gang.network_topology
    if share is None or share.mode != "hard" or share.highest_tier_allowed is None:
        return None
    return _known_tier(share.highest_tier_allowed)


def _known_tier(tier: int) -> int:
    """The tier of the domains the Global knows that a Volcano tier maps to. The agents report
    a cluster's lowest HyperNodes as tier 1 (a tier-0 HyperNode, one node where HyperNodes are
    discovered from node labels, included), so tier 0 is planned as the lowest domain: the
    member cluster's Volcano keeps the pods on one tier-0 HyperNode itself."""
    return max(tier, 1)
