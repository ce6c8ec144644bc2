"""Which pods of a job hold ranks: the pods a placement counts, splits and charges GPUs for.

A Volcano Job's ranked pods are those of its tasks that ask for GPUs; a Volcano Job without
any GPU pod ranks all its pods (a CPU-only job is placed by its pods). A task without GPUs in
a Volcano Job that has GPU pods (an MPI master, a launcher, a parameter server on CPUs) holds
no rank: the placement neither counts nor splits it, and it goes whole, every replica, with
the share that holds its Volcano Job's first ranked pod - rank 0's share for a Job, the
child's share for a HyperJob child (each child stays whole in one cluster). Ranks run in
document order over the ranked pods only (tasks in order, replicas in order; a HyperJob's
children in order). docs/placement.md, "Tasks without GPUs".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from volcano_global.jobspec.fields import Checker
from volcano_global.jobspec.model import Gang, SubJob, TaskGang
from volcano_global.jobspec.pods import pod_resources


def ranked_flags(tasks: Sequence[tuple[int, int]]) -> list[bool]:
    """For each task of one Volcano Job, given as (replicas, GPUs per pod): whether its pods
    hold ranks. A task of replicas 0 runs no pod: its GPUs do not make the job a GPU job."""
    gpu_job = any(replicas and gpus for replicas, gpus in tasks)
    return [bool(gpus) or not gpu_job for _, gpus in tasks]


def ranked_tasks(tasks: Sequence[TaskGang]) -> list[TaskGang]:
    """The tasks of one Volcano Job (normalized) whose pods hold ranks, in document order."""
    flags = ranked_flags([(t.replicas, t.resources.gpus) for t in tasks])
    return [t for t, ranked in zip(tasks, flags, strict=True) if ranked]


def child_tasks(gang: Gang, child: SubJob) -> list[TaskGang]:
    """One HyperJob child's tasks (its replicated job's template)."""
    return [t for t in gang.tasks if t.sub_job == child.name]


def child_ranked_pods(gang: Gang, child: SubJob) -> int:
    """The ranked pods of one child Volcano Job of the replicated job `child`."""
    return sum(t.replicas for t in ranked_tasks(child_tasks(gang, child)))


def gang_ranked_tasks(gang: Gang) -> list[TaskGang]:
    """The ranked tasks of a Job; of a HyperJob, each child's, once per replicated job."""
    if not gang.sub_jobs:
        return ranked_tasks(gang.tasks)
    return [t for s in gang.sub_jobs for t in ranked_tasks(child_tasks(gang, s))]


def ranked_pods(gang: Gang) -> int:
    """The job's ranked pods: what a placement of the whole job holds."""
    if not gang.sub_jobs:
        return sum(t.replicas for t in ranked_tasks(gang.tasks))
    return sum(child_ranked_pods(gang, s) * s.replicas for s in gang.sub_jobs)


def document_ranked_flags(spec: dict[str, Any]) -> list[bool]:
    """`ranked_flags` of a Volcano JobSpec as written (the document was checked at
    submission; its GPUs counted as the parser counted them)."""
    return ranked_flags(
        [(int(t.get("replicas", 0)), task_gpus(t)) for t in spec.get("tasks") or []]
    )


def task_gpus(task: dict[str, Any]) -> int:
    """GPUs (accelerators) per pod of a task as written."""
    return pod_resources(task.get("template") or {}, "", Checker()).gpus
