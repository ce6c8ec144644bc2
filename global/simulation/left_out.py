"""Why a job the empty fleet cannot take is left out of the comparison, in words a user can act
on: the fleet lacks its GPU model, it is larger than the fleet, its pods are larger than any
node, it is larger than any one cluster and may not split, or only an oversubscribed link (or
more clusters than it allows) would hold it."""

from __future__ import annotations

from collections import defaultdict

from volcano_global.simulation.nodes import Fleet
from volcano_global.simulation.workload import TraceJob


def reasons(fleet: Fleet, jobs: list[TraceJob], ids: frozenset[str]) -> dict[str, str]:
    """For each job of `ids`: the first rule, in the order above, that it breaks."""
    per_cluster: dict[tuple[str, str], int] = defaultdict(int)  # (cluster, model) -> GPUs
    largest_node: dict[str, int] = defaultdict(int)
    for (cluster, _, model), nodes in fleet.nodes.items():
        per_cluster[(cluster, model)] += sum(n.gpus for n in nodes)
        largest_node[model] = max([largest_node[model], *(n.gpus for n in nodes)])
    return {job.id: _reason(job, per_cluster, largest_node) for job in jobs if job.id in ids}


def _reason(
    job: TraceJob, per_cluster: dict[tuple[str, str], int], largest_node: dict[str, int]
) -> str:
    models = sorted(largest_node)
    if job.gpu_model is not None and job.gpu_model not in largest_node:
        return f"no cluster has GPU model {job.gpu_model} (fleet: {', '.join(models)})"
    usable = {k: v for k, v in per_cluster.items() if job.gpu_model in (None, k[1])}
    of = f" {job.gpu_model}" if job.gpu_model else ""
    total = sum(usable.values())
    if job.gpus > total:
        return f"asks {job.gpus} GPUs, the fleet has {total}{of}"
    node = max(v for k, v in largest_node.items() if job.gpu_model in (None, k))
    if job.gpus_per_pod > node:
        return f"pods of {job.gpus_per_pod} GPUs, the largest{of} node has {node}"
    biggest = max(usable.values(), default=0)
    if not job.splittable and job.gpus > biggest:
        return f"asks {job.gpus} GPUs, may not split, the largest cluster has {biggest}{of}"
    return (
        "fits only across links it would oversubscribe "
        f"(or across more than its {job.max_clusters} clusters)"
    )
