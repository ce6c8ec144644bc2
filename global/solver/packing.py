"""Turning per-cluster unit counts into concrete domain placements, job by job, against the
free capacity; shared by every policy so that all are judged by the same rules."""

from __future__ import annotations

from collections.abc import Iterable

from volcano_global.solver.capacity import ClusterPool, job_models
from volcano_global.solver.model import ClusterCapacity, JobRequest, Share

Pools = dict[str, ClusterPool]


def pools_of(clusters: Iterable[ClusterCapacity]) -> Pools:
    return {c.name: ClusterPool(c) for c in clusters}


def pack_job(
    job: JobRequest, units_by_cluster: dict[str, int], pools: dict[str, ClusterPool]
) -> tuple[tuple[Share, ...], str | None]:
    """Place the job's units; on success the pools are consumed and the shares returned (each
    with the GPU model it was packed on, chosen here for a job that names none), on failure
    the pools are unchanged and the failing cluster is named."""
    taken: list[tuple[ClusterPool, Share]] = []
    marks: dict[str, int] = {}
    for cluster, units in sorted(units_by_cluster.items()):
        if units <= 0:
            continue
        pool = pools[cluster]
        marks[cluster] = pool.mark()
        placed, model = None, None
        for model in job_models(job, pool):
            placed = pool.place(job, units, model)
            if placed is not None:
                break
        if placed is None:
            for name, mark in marks.items():
                pools[name].rollback(mark)
            return (), cluster
        pods = units * job.unit
        taken.append(
            (
                pool,
                Share(
                    cluster=cluster,
                    units=units,
                    pods=pods,
                    gpus=pods * job.gpus_per_pod,
                    domains=tuple(placed),
                    # the model packed on: the books replay the share from its leaves
                    gpu_model=model,
                ),
            )
        )
    return tuple(share for _, share in taken), None


def packing_order(job: JobRequest) -> tuple[int, int, int]:
    """Most constrained first: topology-bound jobs, then larger units, then larger jobs."""
    return (
        0 if (job.share_tier or job.unit_tier) else 1,
        -job.unit_gpus,
        -job.gpus,
    )
