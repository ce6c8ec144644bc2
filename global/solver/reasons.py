"""Why a job is still pending, in numbers, against what is left after the round's decision."""

from __future__ import annotations

from dataclasses import replace

from volcano_global.solver.capacity import ClusterPool, job_models
from volcano_global.solver.model import JobRequest, link_key
from volcano_global.solver.model_names import fleet_names_for
from volcano_global.solver.traffic import pair_demand_gbps


def explain(
    job: JobRequest,
    pools: dict[str, ClusterPool],
    links: dict[tuple[str, str], float],
    quota_room: dict[str, int],
) -> str:
    need = _need(job)
    room = quota_room.get(job.queue)
    if room is not None and room < job.gpus:
        return f"{need}; queue {job.queue} has {room} GPUs of quota left"
    if not pools:
        return (
            f"{need}; no member cluster is Ready with an inventory (each cluster's agent "
            "reports its nodes: `vglobal clusters` shows their state)"
        )
    candidates = {
        name: pool
        for name, pool in pools.items()
        if job.allowed_clusters is None or name in job.allowed_clusters
    }
    missing = _missing_model(job, pools)
    if missing:
        return f"{need}; {missing}"
    if job.cluster_limit < 2:
        return f"{need}{_whole_reason(job, candidates)}"
    return f"{need}{_split_reason(job, candidates, links)}"


def _whole_reason(job: JobRequest, candidates: dict[str, ClusterPool]) -> str:
    """Why a job that runs in one cluster did not start: the most pods one cluster can take."""
    # Counted in the job's own units, or in pods when the whole job is one unit.
    probe = job if job.unit_pods else replace(job, unit_pods=1)
    pods = {name: _units(probe, pool) * probe.unit for name, pool in candidates.items()}
    best = max(pods, key=lambda c: (pods[c], c), default=None)
    if best is None or pods[best] < job.pods:
        where = (
            f"the most any cluster can take is {pods[best]} pods, in {best}"
            if best and pods[best]
            else "no cluster can take any of its pods now"
        )
        return f" in one cluster (not splittable); {where}{_tier_note(job)}"
    return f"; it fits in {best}, but the round gave that room to jobs ahead of it"


def _split_reason(
    job: JobRequest, candidates: dict[str, ClusterPool], links: dict[tuple[str, str], float]
) -> str:
    """Why a job that may split did not start: too few units anywhere, or a link too thin."""
    fits = {name: min(_units(job, pool), job.units) for name, pool in candidates.items()}
    if not any(fits.values()):
        where = f" in clusters {', '.join(job.allowed_clusters)}" if job.allowed_clusters else ""
        return f"; no cluster{where} has room for one unit of {job.unit} pods now{_tier_note(job)}"
    ranked = sorted(fits, key=lambda c: (-fits[c], c))[: job.cluster_limit]
    ranked = [c for c in ranked if fits[c] >= job.min_share_units]
    reachable = sum(fits[c] for c in ranked)
    if reachable < job.units:
        gpus = reachable * job.unit * job.gpus_per_pod
        if len(ranked) == 1:
            return (
                f"; only {ranked[0]} has room for its units now, {gpus} GPUs (it may split over "
                f"at most {job.cluster_limit} clusters)"
            )
        return (
            f"; best split {gpus} GPUs over {', '.join(ranked) or 'no cluster'} (at most "
            f"{job.cluster_limit} clusters)"
        )
    used = _smallest_cover(ranked, fits, job.units)
    demand = pair_demand_gbps(job.allreduce_gbps, len(used))
    for i, a in enumerate(used):
        for b in used[i + 1 :]:
            free = links.get(link_key(a, b))
            if free is None:
                return f"; a split over {', '.join(used)} needs a link {a}<->{b}; none exists"
            if free + 1e-9 < demand:
                return (
                    f"; best split over {', '.join(used)}: link {a}<->{b} has {free:g} Gbps "
                    f"free, the split needs {demand:.1f} Gbps"
                )
    over = ", ".join(used)
    return f"; a split over {over} fits, but the round gave that room to jobs ahead of it"


def _need(job: JobRequest) -> str:
    if not job.gpus_per_pod:
        return f"needs {job.pods} pods (no GPUs)"
    model = job.gpu_model or "GPU"
    return f"needs {job.pods} pods x {job.gpus_per_pod} {model} ({job.gpus} GPUs)"


def _missing_model(job: JobRequest, pools: dict[str, ClusterPool]) -> str | None:
    """Why no cluster can ever take a job pinned to a model the fleet does not have."""
    fleet = sorted({m for pool in pools.values() for m in pool.models() if m})
    if not job.gpu_model or not job.gpus_per_pod or not fleet or job.gpu_model in fleet:
        return None
    text = f"no cluster has GPU model {job.gpu_model} (fleet: {', '.join(fleet)})"
    other = fleet_names_for(job.gpu_model, fleet)
    if other:
        text += (
            f"; the fleet calls it {' or '.join(other)}: pin that "
            "(global.volcano.sh/gpu-model or the nodeSelector)"
        )
    return text


def _tier_note(job: JobRequest) -> str:
    if job.share_tier is not None:
        return f" (its share in a cluster must fit inside one tier-{job.share_tier} domain)"
    if job.unit_tier is not None:
        return f" (each unit of {job.unit} pods must fit inside one tier-{job.unit_tier} domain)"
    return ""


def _units(job: JobRequest, pool: ClusterPool) -> int:
    return max((pool.max_units(job, m) for m in job_models(job, pool)), default=0)


def _smallest_cover(ranked: list[str], fits: dict[str, int], units: int) -> list[str]:
    used, total = [], 0
    for name in ranked:
        used.append(name)
        total += fits[name]
        if total >= units:
            break
    return used
