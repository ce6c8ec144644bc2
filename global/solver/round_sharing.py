"""Step 7c of a round (`round_plan.plan_round`): time-sharing's demotions
(`timesharing.demote`) over what the round's starts and evictions leave."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from volcano_global.solver import planning
from volcano_global.solver.free_pools import remaining
from volcano_global.solver.model import Decision, Policy, Snapshot
from volcano_global.solver.preemption import Eviction, Standing
from volcano_global.solver.timesharing import demote

if TYPE_CHECKING:
    from volcano_global.solver.round_plan import RoundInput, RoundOptions

log = logging.getLogger(__name__)


def demotions(
    left: Snapshot,
    decision: Decision,
    evictions: list[Eviction],
    resizing: set[str],
    queues: Mapping[str, Standing],
    data: RoundInput,
    options: RoundOptions,
) -> list[Eviction]:
    """Step 7c: `timesharing.demote` over what the starts and evictions leave; the jobs
    still waiting may take the place of gangs that received more GPU-time. An elastic job the
    round resizes (`resizing`: its growth, its shrink) does not yield. A job that reads data
    is left to the steps that stage it (a demotion does not copy its data)."""
    if not data.time_sharing or options.time_sharing is None:
        return []
    admitted = {d.job_id for d in decision.jobs if d.admitted}
    busy = admitted | resizing | {e.preemptor for e in evictions} | set(data.data)
    waiting = [j for j in left.jobs if j.id not in busy]
    after, queues = _after_evictions(left, evictions, resizing, queues)
    try:
        return demote(
            after, waiting, quanta=data.time_sharing, queues=queues, rules=options.time_sharing
        )
    except Exception:  # a defect: the round's placements and evictions still go ahead
        log.exception("choosing the round's demotions failed")
        return []


def _after_evictions(
    left: Snapshot,
    evictions: list[Eviction],
    resizing: set[str],
    queues: Mapping[str, Standing],
) -> tuple[Snapshot, dict[str, Standing]]:
    """What the round's evictions leave: their victims' GPUs and links free and gone from
    the running jobs (as the elastic jobs the round resizes), their preemptors' placements
    taken; the queues' standings with both."""
    victims = [v for e in evictions for v in e.victims]
    back: dict[tuple[str, str], float] = defaultdict(float)
    for v in victims:
        for b in v.links:
            back[b.a, b.b] += b.gbps
    links = tuple(
        replace(x, reserved_gbps=max(x.reserved_gbps - back[x.a, x.b] - back[x.b, x.a], 0.0))
        for x in left.links
    )
    gone = {v.id for v in victims} | resizing
    freed = replace(
        left,
        clusters=planning.freed(left.clusters, [p for v in victims for p in v.pods]),
        links=links,
        running=tuple(r for r in left.running if r.id not in gone),
    )
    placements = tuple(e.placement for e in evictions)
    after = remaining(freed, Decision(Policy.GREEDY, "", placements)) if placements else freed
    standing = dict(queues)
    held: dict[str, int] = defaultdict(int)
    for v in victims:
        held[v.queue] -= v.total_gpus
    jobs = {j.id: j for j in left.jobs}
    for e in evictions:
        held[jobs[e.preemptor].queue] += jobs[e.preemptor].gpus
    for name, change in held.items():
        if name in standing:
            standing[name] = replace(standing[name], held=standing[name].held + change)
    return after, standing
