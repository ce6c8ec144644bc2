"""Step 1 of a round (`round_plan.plan_round`): the waiting jobs in line - ordered (1),
steered to where their data lets them start (1b, `gravity.steer`), long jobs held back while
long work holds its share (1c, `long_work.keep_room`) - and the window the server reads in
full (`window`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from volcano_global.solver import gravity, long_work, planning
from volcano_global.solver.long_work import Estimate
from volcano_global.solver.model import JobRequest, Policy
from volcano_global.solver.outcomes import Outcome, Status

if TYPE_CHECKING:
    from volcano_global.solver.round_plan import RoundInput, RoundOptions


def in_line(
    data: RoundInput, policy: Policy, options: RoundOptions
) -> tuple[list[JobRequest], dict[str, gravity.Steer], dict[str, Outcome]]:
    """Steps 1, 1b and 1c: the waiting jobs in order, where their data lets them start, and
    the long jobs held back (with their outcomes)."""
    waiting = order(data, policy, options)  # 1
    waiting, steered = gravity.steer(  # 1b
        waiting,
        data.data,
        clusters=data.clusters,
        links=data.links,
        running=data.running,
        options=options.data,
        copying=data.copying,
        evicting=options.preemption is not None,
        regions=data.regions,
        no_prefetch=data.no_prefetch,
        no_copies_into=data.no_copies_into,
    )
    waiting, held_back = _keep_room(data, waiting, policy, options)  # 1c
    return waiting, steered, held_back


def _keep_room(
    data: RoundInput, waiting: list[JobRequest], policy: Policy, options: RoundOptions
) -> tuple[list[JobRequest], dict[str, Outcome]]:
    """Step 1c: long jobs held back while long work holds its share (`long_work`), for the
    planned policies (the baselines stand for other systems, which have no such rule)."""
    rule = options.long_work if policy.planned else None
    estimates = {
        w.request.id: Estimate(w.estimate_s, w.request.queue)
        for w in (data.waiting if rule is not None else ())
        if w.estimate_s is not None
    }
    kept, held_back = long_work.keep_room(
        waiting,
        estimates,
        running=data.running,
        clusters=data.clusters,
        fleet_gpus=data.fleet_gpus,
        durations=data.durations,
        options=rule,
    )
    return kept, {k: Outcome(k, Status.WAITING, why) for k, why in held_back.items()}


def order(data: RoundInput, policy: Policy, options: RoundOptions) -> list[JobRequest]:
    """Step 1: the waiting jobs in queue order, with what a planned policy is told about
    time. Prefix-stable: the first n of a longer list come out in the same order, so the
    server may read only the window's jobs (`window`)."""
    candidates = _candidates(data, policy, options)
    by_id = {w.request.id: w for w in data.waiting}
    return [
        planning.with_time(policy, by_id[c.key].request, c, by_id[c.key].estimate_s, data.durations)
        for c in candidates
    ]


def window(data: RoundInput, policy: Policy, options: RoundOptions, size: int) -> list[str]:
    """The ids of the first `size` waiting jobs in the order of step 1 (what the server
    reads in full for a round)."""
    return [c.key for c in _candidates(data, policy, options)[:size]]


def _candidates(data: RoundInput, policy: Policy, options: RoundOptions) -> list:  # type: ignore[type-arg]
    return planning.order(
        policy,
        [
            planning.waiting(
                w.request.id,
                queue=w.request.queue,
                priority=w.request.priority,
                gpus=w.request.gpus,
                submitted_at=w.submitted_at,
                estimate_s=w.estimate_s,
                now=data.now,
                durations=data.durations,
                reserve_after_s=options.reserve_after_s,
                level=w.request.served_gpu_s if w.request.queue in data.time_sharing else 0.0,
            )
            for w in data.waiting
        ],
        held={name: q.held for name, q in data.tree.items()},
        weights={name: q.weight for name, q in data.tree.items()},
        tree=data.tree,
    )
