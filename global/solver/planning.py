"""A round's plan, computed the same way by the server's scheduling loop and the simulator: the
order of the waiting jobs and what the solver is told about time (how long a waiting job is
expected to run, whether it is owed a reservation, when running jobs are expected to end).

Without a planned policy (the baselines, as Kueue MultiKueue and Karmada order work) the order
is priority, fair share, submission time, and nothing about time is passed on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime

from volcano_global.solver.durations import DurationModel
from volcano_global.solver.fair_share import QueueNode
from volcano_global.solver.model import JobRequest, LinkBandwidth, Policy, RunningJob
from volcano_global.solver.queue_order import Candidate, fair_order

RESERVE_AFTER_S = 1800.0  # waited this long: owed a reservation, first in its queue


def waiting(
    key: str,
    *,
    queue: str,
    priority: int,
    gpus: int,
    submitted_at: datetime,
    estimate_s: float | None,
    now: datetime,
    durations: DurationModel,
    reserve_after_s: float = RESERVE_AFTER_S,
) -> Candidate:
    return Candidate(
        key,
        queue,
        priority,
        gpus,
        submitted_at,
        service=durations.service(gpus, estimate_s),
        due=(now - submitted_at).total_seconds() >= reserve_after_s,
    )


def order(
    policy: Policy,
    jobs: list[Candidate],
    *,
    held: dict[str, int],
    weights: dict[str, int],
    tree: Mapping[str, QueueNode] | None = None,
) -> list[Candidate]:
    return fair_order(jobs, held=held, weights=weights, by_service=policy.planned, tree=tree)


def with_time(
    policy: Policy,
    request: JobRequest,
    candidate: Candidate,
    estimate_s: float | None,
    durations: DurationModel,
) -> JobRequest:
    if not policy.planned:
        return request
    return replace(
        request, estimate_s=durations.likely_within(request.gpus, estimate_s), due=candidate.due
    )


def running(
    key: str,
    *,
    gpus: tuple[tuple[str, str, int], ...],
    links: tuple[LinkBandwidth, ...],
    started_at: datetime,
    estimate_s: float | None,
    now: datetime,
    durations: DurationModel,
) -> RunningJob:
    elapsed = max((now - started_at).total_seconds(), 0.0)
    total = sum(g for _, _, g in gpus)
    return RunningJob(key, gpus, links, ends_in_s=durations.remaining(total, elapsed, estimate_s))
