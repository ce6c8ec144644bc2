"""Step 1c of a round (issue 34): long work does not close the fleet to everything else.

Where a fleet is full of gangs that each run for hours, every policy starts the next long
gang as soon as there is room, and short work that arrives meanwhile waits for hours behind
them: the average JCT is the long jobs' run time, whatever the placement. A waiting job whose
*expected* run is at least `LongWork.long_s` therefore starts only while the GPUs long work
holds - running jobs expected to go on for `long_s` or more, and the long jobs this round lets
through - stay within `LongWork.share` of the fleet, and only while a shorter job waits that
has the GPUs to start now (GPU counts of its model, in one cluster or, split, in all: a short
job that cannot start anyway holds nothing back; one held back by quota or data still does,
a round at most, as the GPUs it counts are free). When no long work holds anything, one long
job always goes through, so a job wider than the share is not held for ever.

Only jobs that say how long they run are judged: the user's runningEstimate, corrected by how
the estimates of the job's queue held (`DurationModel.remaining` at age 0). Without one the
duration model gives every job of a size class the same expectation, which cannot tell long
from short, so such a job is never held back. Priority stays first: a long job is held back
only while a job of its priority or higher that is not long waits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from volcano_global.solver.durations import DurationModel
from volcano_global.solver.model import ClusterCapacity, JobRequest, RunningJob


@dataclass(frozen=True)
class LongWork:
    long_s: float = 2 * 3600.0  # an expected run this long or longer is long work
    share: float = 0.6  # of the fleet's GPUs, what long work may hold while short work waits


@dataclass(frozen=True)
class Estimate:
    """A waiting job's runningEstimate (seconds) and its queue."""

    seconds: float
    queue: str


def keep_room(
    waiting: Sequence[JobRequest],
    estimates: Mapping[str, Estimate],
    *,
    running: Sequence[RunningJob],
    clusters: Sequence[ClusterCapacity],
    fleet_gpus: int,
    durations: DurationModel,
    options: LongWork | None,
) -> tuple[list[JobRequest], dict[str, str]]:
    """The waiting jobs the round may start, in order, and those held back with the reason."""
    if options is None or fleet_gpus <= 0 or not estimates:
        return list(waiting), {}
    expected = {
        j.id: durations.remaining(j.gpus, 0.0, e.seconds, queue=e.queue)
        for j in waiting
        if (e := estimates.get(j.id)) is not None
    }
    long = {job_id for job_id, s in expected.items() if s >= options.long_s}
    if not long:
        return list(waiting), {}
    free = _free_gpus(clusters)
    short_priority = max(
        (j.priority for j in waiting if j.id not in long and _may_start(j, free)), default=None
    )
    held = sum(r.total_gpus for r in running if r.ends_in_s >= options.long_s)
    cap = options.share * fleet_gpus
    kept: list[JobRequest] = []
    held_back: dict[str, str] = {}
    for job in waiting:
        blocked = short_priority is not None and job.priority <= short_priority
        if job.id in long and blocked and held > 0 and held + job.gpus > cap:
            held_back[job.id] = _reason(expected[job.id], held, fleet_gpus, options)
            continue
        if job.id in long:
            held += job.gpus
        kept.append(job)
    return kept, held_back


def _free_gpus(clusters: Sequence[ClusterCapacity]) -> dict[tuple[str, str], int]:
    free: dict[tuple[str, str], int] = {}
    for cluster in clusters:
        for leaf in cluster.leaves:
            key = (cluster.name, leaf.gpu_model)
            free[key] = free.get(key, 0) + leaf.free_gpus
    return free


def _may_start(job: JobRequest, free: Mapping[tuple[str, str], int]) -> bool:
    """Whether the job's GPUs are free now, by counts: in one cluster it may use, or in all of
    them together for a job that may split."""
    usable = [
        gpus
        for (cluster, model), gpus in free.items()
        if job.gpu_model in (None, model)
        and (job.allowed_clusters is None or cluster in job.allowed_clusters)
    ]
    if job.splittable and job.cluster_limit > 1:
        return sum(usable) >= job.gpus
    return max(usable, default=0) >= job.gpus


def _reason(expected_s: float, held: int, fleet_gpus: int, options: LongWork) -> str:
    return (
        f"long work: expected to run {expected_s / 3600:.1f} h (its runningEstimate, as its "
        f"queue's estimates held); jobs expected to run {options.long_s / 3600:g} h or more hold "
        f"{held:,} of the fleet's {fleet_gpus:,} GPUs and may hold {options.share:.0%} while "
        "shorter jobs wait: it starts when long work ends or no shorter job waits"
    )
