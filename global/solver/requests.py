"""From a normalized job (the unified job API) to the solver's `JobRequest`."""

from __future__ import annotations

import math

from volcano_global.jobspec import Communication, Gang, SplitPolicy, SubJob, TaskGang
from volcano_global.jobspec.ranks import child_ranked_pods, child_tasks, ranked_pods, ranked_tasks
from volcano_global.solver.model import JobRequest, Part
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
    yet (GPU pods of different sizes in one Volcano Job or one HyperJob child).
    `served_gpu_s`: what its earlier runs received (time-sharing). A HyperJob whose children
    differ (GPU model, pods, GPUs per pod, clusters named) is a request of its children
    (`model.Part`), which step 5c of a round places (`parts.py`), not the model."""
    rate = _crossing_gbps(split, communication)
    if gang.sub_jobs and split.unit == "subJob" and _children_differ(gang):
        return _parted_request(job_id, gang, split, rate, priority, queue, served_gpu_s)
    # A task of replicas 0 (or of a child of replicas 0) runs no pod: its pod size and model
    # do not count. Tasks without GPUs beside GPU tasks hold no rank (`jobspec/ranks.py`):
    # neither counted nor split.
    idle = {s.name for s in gang.sub_jobs if not s.replicas}
    gpu_tasks = [t for t in gang.tasks if t.resources.gpus and t.replicas and t.sub_job not in idle]
    sizes = {t.resources.gpus for t in gpu_tasks}
    if len(sizes) > 1:
        raise ValueError(f"GPU pods of different sizes {sorted(sizes)}")
    gpus_per_pod = sizes.pop() if sizes else 0
    pods = ranked_pods(gang)
    models = {t.gpu_model for t in gpu_tasks}
    if len(models) > 1:
        raise ValueError(f"parts on different GPU models {sorted(m or '?' for m in models)}")
    named = [s.cluster_names for s in gang.sub_jobs]
    allowed = tuple(sorted({c for names in named for c in names})) if named and all(named) else None
    if gang.sub_jobs and split.unit == "subJob":  # children alike (else parts, above)
        unit = max((child_ranked_pods(gang, s) for s in gang.sub_jobs if s.replicas), default=0)
    else:
        # A Job, or a HyperJob whose one replicated job is split automatically (its pool); an
        # elastic job is placed in its units, split or not.
        unit = split.unit_pods if split.mode == "auto" or split.min_units else 0
    unit, unit_tier = _unit_tier(gpu_tasks, unit)
    share_tier = _share_tier(gang)
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


def _crossing_gbps(split: SplitPolicy, communication: Communication | None) -> float:
    """V / tau of the traffic model: declared, measured, or from the plan (0: nothing)."""
    if split.crossing_gbps is not None:
        return split.crossing_gbps
    return allreduce_gbps(communication) if communication is not None else 0.0


def _child_tasks(gang: Gang, child: SubJob) -> list[TaskGang]:
    """The tasks of one replicated job that run pods and hold ranks."""
    return [t for t in ranked_tasks(child_tasks(gang, child)) if t.replicas]


def _children_differ(gang: Gang) -> bool:
    """Whether the HyperJob's children differ in GPU model, pod sizes, pods or the clusters
    they name: then each is placed as itself (`Part`), not as one unit of many alike."""
    kinds = set()
    for child in gang.sub_jobs:
        if not child.replicas:
            continue
        tasks = _child_tasks(gang, child)
        models = frozenset(t.gpu_model for t in tasks if t.resources.gpus)
        sizes = frozenset(t.resources.gpus for t in tasks)
        pods = child_ranked_pods(gang, child)
        kinds.add((models, sizes, pods, tuple(sorted(child.cluster_names))))
    return len(kinds) > 1


def _parts(gang: Gang, split: SplitPolicy) -> tuple[Part, ...]:
    """Each child Volcano Job in document order (rank order), as a `Part`."""
    if split.mode != "auto":
        raise ValueError(
            "its children differ (GPU model, size or clusters named) and its split policy "
            "keeps it in one cluster, where a share holds children of one GPU model and pod size"
        )
    parts = []
    for child in gang.sub_jobs:
        tasks = _child_tasks(gang, child)
        sizes = {t.resources.gpus for t in tasks}
        if len(sizes) > 1:
            raise ValueError(f"child {child.name!r} has pods of different sizes {sorted(sizes)}")
        models = {t.gpu_model for t in tasks if t.resources.gpus}
        if len(models) > 1:
            raise ValueError(f"child {child.name!r} has parts on different GPU models")
        per_pod = sizes.pop() if sizes else 0
        model = models.pop() if models else None
        unit, unit_tier = _unit_tier([t for t in tasks if t.resources.gpus], 0)
        topology = child.network_topology
        hard = topology is not None and topology.mode == "hard"
        tier = topology.highest_tier_allowed if hard and topology is not None else None
        pods = child_ranked_pods(gang, child)
        parts += [
            Part(
                name=f"{child.name}-{index}",
                pods=pods,
                gpus_per_pod=per_pod,
                gpu_model=model,
                allowed_clusters=tuple(sorted(child.cluster_names)) or None,
                unit_pods=unit if unit and pods % unit == 0 else 0,
                unit_tier=unit_tier,
                share_tier=_known_tier(tier) if tier is not None else None,
            )
            for index in range(child.replicas)
        ]
    return tuple(parts)


def _parted_request(
    job_id: str,
    gang: Gang,
    split: SplitPolicy,
    rate: float,
    priority: int,
    queue: str,
    served_gpu_s: float,
) -> JobRequest:
    """A HyperJob whose children differ, as the request of its children (`model.Part`)."""
    return JobRequest(
        id=job_id,
        pods=1,  # (a parted request's GPUs as one lump: what ordering and quotas read)
        gpus_per_pod=gang.total_gpus,
        gpu_model=gang.gpu_model,
        priority=priority,
        queue=queue,
        splittable=True,
        max_clusters=split.max_clusters,
        allreduce_gbps=rate,
        served_gpu_s=served_gpu_s,
        parts=_parts(gang, split),
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
