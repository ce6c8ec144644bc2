"""Elastic data-parallel width: the fewest whole units (data-parallel replicas) a job may run
with, read once at submission.

Resizing is opt-in, because a resize is a checkpoint-restart at another world size and a job
must be written for that. A job is elastic only when it says so in the Global's own words:
the annotation `global.volcano.sh/elastic: "true"`, or `minDataParallel` in its communication
plan. Volcano's `minAvailable` below the replicas alone does not make a job elastic (many
users set it only to start before stragglers, or to ride out a failed pod); such a job keeps
Volcano's meaning, its gang minimum, and is placed whole.

An elastic job's minimum is Volcano's `minAvailable`: a Job whose `minAvailable` is below its
replicas starts when `minAvailable` pods can run (the gang plugin's job-ready check) and its
pods beyond that are elastic - scheduled when room frees and the first taken back by
preempt/reclaim (the gang plugin lets a victim go only while the job keeps `minAvailable`
ready). The tasks' own `minAvailable` count only when the job's is not below their sum
(`JobInfo.CheckTaskValid` / `CheckTaskReady` skip them otherwise); a narrow width keeps the
job's first ranks. The Global places whole units (pods that stay in one cluster: a
data-parallel replica, a `partitionPolicy` partition, a HyperJob child job), so the width is
counted in units, rounded up: `minAvailable: 5` with units of 2 pods runs at least 3 units
(6 pods). A HyperJob's `minAvailable` counts child jobs, its units. A communication plan may
say the same in replicas: `minDataParallel`; with both, the stricter.
"""

from __future__ import annotations

import math

from volcano_global.jobspec.model import Communication, Gang, TaskGang
from volcano_global.jobspec.ranks import ranked_pods, ranked_tasks

NO_RANGE = (
    '"true", but the job gives no width below all of it: set spec.minAvailable below the '
    "replicas (a HyperJob's: below its child jobs), or minDataParallel in the communication "
    "plan, to the fewest the training restarts with (a job without GPUs is always whole)"
)


def min_units(gang: Gang, *, unit_pods: int, communication: Communication | None) -> int:
    """The fewest units of `unit_pods` pods the job runs with; 0 when it needs all of them
    (a rigid gang)."""
    ranked_count = ranked_pods(gang)
    if unit_pods < 1 or ranked_count % unit_pods or not gang.total_gpus:
        return 0  # (a job without GPUs is placed whole: the width is about GPUs)
    units = ranked_count // unit_pods
    if gang.sub_jobs:
        fewest = gang.min_sub_jobs or units
    else:
        # Tasks without GPUs run whole at any width (`ranks.py`): the rest of the minimum is
        # the ranked pods'.
        ranked = ranked_tasks(gang.tasks)
        least = gang.min_available - (gang.total_pods - ranked_count)
        fewest = max(1, math.ceil(least / unit_pods)) if gang.min_available else units
        if gang.min_available >= sum(t.min_available for t in gang.tasks):
            fewest = _tasks_met(ranked, unit_pods, max(fewest, 1), units)
    if communication is not None and communication.min_data_parallel is not None:
        per_replica = communication.unit_gpus / communication.gpus_per_pod  # pods (may be < 1)
        pods = math.ceil(communication.min_data_parallel * per_replica)
        # With both, the stricter; the document's minAvailable at all replicas says nothing.
        fewest = max(fewest if fewest < units else 0, math.ceil(pods / unit_pods))
    return fewest if 0 < fewest < units else 0


def _tasks_met(tasks: list[TaskGang], unit_pods: int, fewest: int, units: int) -> int:
    """The fewest units from `fewest` up whose first pods in rank order (tasks in document
    order) meet every task's own `minAvailable`: a narrow width keeps the job's first ranks."""
    for width in range(fewest, units + 1):
        pods, start, met = width * unit_pods, 0, True
        for task in tasks:
            kept = min(max(pods - start, 0), task.replicas)
            met = met and kept >= task.min_available
            start += task.replicas
        if met:
            return width
    return units
