"""The simulator's running jobs as a round reads them (`planning.running`): their GPUs and
pods per cluster, reserved links, expected end, what an eviction would lose (work since the
last checkpoint, and the restore of the checkpoint elsewhere), what they received over all
their runs (time-sharing's attained service)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from datetime import datetime

from volcano_global.simulation import evictions
from volcano_global.simulation.running import EPOCH, Running, stamp
from volcano_global.solver import LinkBandwidth, RunningJob, planning
from volcano_global.solver.durations import DurationModel


def running_jobs(
    running: dict[str, Running],
    clock: datetime,
    durations: DurationModel,
    *,
    checkpoint_s: float | None,
    staging_gbps: float,
    served: Mapping[str, float],
) -> list[RunningJob]:
    """`served`: GPU-seconds each job's earlier (evicted) runs received."""
    now = (clock - EPOCH).total_seconds()
    out = []
    for run in running.values():
        pods: dict[tuple[str, str, str, int], int] = defaultdict(int)
        for cluster, leaf, model, _, _ in run.bound:
            pods[(cluster, leaf, model, run.job.gpus_per_pod)] += 1
        gpus: dict[tuple[str, str], int] = defaultdict(int)
        for cluster, _, model, _, count in run.bound:
            gpus[(cluster, model)] += count
        out.append(
            planning.running(
                run.job.id,
                gpus=tuple((c, m, g) for (c, m), g in sorted(gpus.items())),
                links=tuple(LinkBandwidth(a, b, g) for a, b, g in run.reservations),
                started_at=stamp(run.start),
                estimate_s=run.job.estimate_s,
                now=clock,
                durations=durations,
                priority=run.job.priority,
                queue=run.job.queue,
                preemptable=run.job.preemptable,
                lost_s=evictions.lost_s(now - run.start, checkpoint_s),
                restore_s=(run.job.checkpoint_bytes or 0) * 8 / (staging_gbps * 1e9),
                pods=tuple((c, leaf, m, n, g) for (c, leaf, m, g), n in sorted(pods.items())),
                attained_gpu_s=served.get(run.job.id, 0.0) + sum(gpus.values()) * (now - run.start),
            )
        )
    return out
