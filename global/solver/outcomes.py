"""Step 8 of a round (`round_plan.py`): one typed outcome per waiting job the round considered,
with the times it promises. Started, reserved and preempting jobs say what the solver and the
evictions decided; a waiting job that may evict and would, once its victims have run the
minimum run time, says whom it will evict and when; another waiting job says when running
work is expected to leave room for it and whose end that is. Both for the first `EXPLAINED`
waiting jobs in queue order, so that explaining stays a small part of a round."""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum

from volcano_global.solver.model import (
    Decision,
    JobDecision,
    JobRequest,
    Policy,
    RunningJob,
    Snapshot,
)
from volcano_global.solver.preemption import (
    Eviction,
    Rules,
    Standing,
    preempt,
    remaining,
)

log = logging.getLogger(__name__)
EXPLAINED = 16  # waiting jobs per round told when room is expected


class Status(StrEnum):
    STARTED = "Started"  # placed this round
    RESERVED = "Reserved"  # holds a reservation: starts when the capacity it holds is free
    PREEMPTING = "Preempting"  # starts once the jobs it evicts this round are gone
    WILL_PREEMPT = "WillPreempt"  # will evict once its victims have run the minimum run time
    WAITING = "Waiting"
    SET_ASIDE = "SetAside"  # cannot be modelled (the reason says why)


@dataclass(frozen=True)
class Outcome:
    """What the round decided for one waiting job, in words and in numbers: `at` is when it
    is expected to start, evict or find room (None: not known)."""

    job_id: str
    status: Status
    reason: str
    at: datetime | None = None
    victims: tuple[str, ...] = ()  # the running jobs it evicts, or will evict


def outcomes(
    snapshot: Snapshot,
    decision: Decision,
    *,
    set_aside: Mapping[str, str],
    evictions: list[Eviction],
    rules: Rules | None,
    queues: Mapping[str, Standing],
    now: datetime,
    excluded: Collection[str] = (),
) -> dict[str, Outcome]:
    """Every decision but the `excluded` ones (growth), and every job set aside."""
    evicting = {e.preemptor: e for e in evictions}
    reserved = {job_id for job_id, _ in decision.reserved}
    out: dict[str, Outcome] = {}
    for d in decision.jobs:
        if d.job_id in excluded:
            continue
        if d.admitted:
            out[d.job_id] = Outcome(d.job_id, Status.STARTED, _where(d), now)
        elif d.job_id in evicting:
            e = evicting[d.job_id]
            victims = tuple(v.name or v.id for v in e.victims)
            out[d.job_id] = Outcome(d.job_id, Status.PREEMPTING, e.reason, now, victims)
        else:
            status = Status.RESERVED if d.job_id in reserved else Status.WAITING
            out[d.job_id] = Outcome(d.job_id, status, d.reason or "waiting")
    for job_id, why in set_aside.items():
        out[job_id] = Outcome(job_id, Status.SET_ASIDE, why)
    left = _left(snapshot, decision, evictions, excluded)
    out |= _will_preempt(left, out, rules, queues, now)
    out |= _room_expected(left, out, now)
    return out


def _where(d: JobDecision) -> str:
    return "placed: " + "; ".join(f"{s.pods} pods in {s.cluster}" for s in d.shares)


def _left(
    snapshot: Snapshot, decision: Decision, evictions: list[Eviction], excluded: Collection[str]
) -> Snapshot:
    """What the round leaves: free capacity after its starts, the running jobs it does not
    evict or resize, and the jobs still waiting in queue order."""
    gone = {v.id for e in evictions for v in e.victims} | set(excluded)
    left = remaining(snapshot, decision)
    waiting = {d.job_id for d in decision.jobs if not d.admitted}
    waiting -= {e.preemptor for e in evictions} | set(excluded)
    return replace(
        left,
        running=tuple(r for r in left.running if r.id not in gone),
        jobs=tuple(j for j in snapshot.jobs if j.id in waiting),
    )


def _will_preempt(
    left: Snapshot,
    out: Mapping[str, Outcome],
    rules: Rules | None,
    queues: Mapping[str, Standing],
    now: datetime,
) -> dict[str, Outcome]:
    """The waiting jobs that would evict were it not for the minimum run time: whom, and
    when the last of them has run it (the evictions a later round then makes, if nothing
    else changed)."""
    if rules is None or rules.min_run_s <= 0 or not left.running:
        return {}
    mayevict = [j for j in _first_waiting(left.jobs, out) if j.may_evict_for]
    if not mayevict:
        return {}
    pending = Decision(Policy.GREEDY, "FEASIBLE", tuple(JobDecision(j.id, False) for j in mayevict))
    try:
        later = preempt(
            replace(left, jobs=tuple(mayevict)),
            pending,
            rules=replace(rules, min_run_s=0.0),
            queues=dict(queues),
        )
    except Exception:  # an explanation must never fail the round
        log.exception("explaining later preemptions failed")
        return {}
    found = {}
    for e in later:
        young = [v for v in e.victims if v.run_s < rules.min_run_s]
        if not young:
            continue  # not held back by the minimum run time: the caps or the cost of waiting
        wait = max(rules.min_run_s - v.run_s for v in young)
        names = ", ".join(v.name or v.id for v in e.victims)
        reason = (
            f"{out[e.preemptor].reason}; will preempt {names} once "
            f"{'it has' if len(e.victims) == 1 else 'they have'} run "
            f"{rules.min_run_s:g} s: in about {wait:,.0f} s"
        )
        found[e.preemptor] = Outcome(
            e.preemptor,
            Status.WILL_PREEMPT,
            reason,
            now + timedelta(seconds=wait),
            tuple(v.name or v.id for v in e.victims),
        )
    return found


def _room_expected(left: Snapshot, out: Mapping[str, Outcome], now: datetime) -> dict[str, Outcome]:
    """For the first EXPLAINED jobs still waiting: when running work is expected to leave
    enough GPUs of its model free in one cluster it may use, and whose end that is (GPU
    counts, not nodes: an estimate, and the word says so)."""
    if not left.running:
        return {}
    room = _Room(left)
    found: dict[str, Outcome] = {}
    for job in _first_waiting(left.jobs, out):
        when = room.first(job)
        if when is None:
            continue
        seconds, cluster, ending = when
        o = out[job.id]
        reason = (
            f"{o.reason}; room expected in about {seconds:,.0f} s, when "
            f"{ending.name or ending.id} is expected to end ({job.gpus} GPUs free in {cluster})"
        )
        found[job.id] = replace(o, reason=reason, at=now + timedelta(seconds=seconds))
    return found


class _Room:
    """Per (cluster, GPU model): the GPUs free now, and the running jobs holding GPUs there
    in the order they are expected to end, with the GPUs freed by each end."""

    def __init__(self, left: Snapshot) -> None:
        self.free: dict[tuple[str, str], int] = {}
        for state in left.clusters:
            for leaf in state.leaves:
                key = (state.name, leaf.gpu_model)
                self.free[key] = self.free.get(key, 0) + leaf.free_gpus
        ends: dict[tuple[str, str], list[tuple[float, str, RunningJob, int]]] = {}
        for run in left.running:
            for cluster, model, gpus in run.gpus:
                ends.setdefault((cluster, model), []).append((run.ends_in_s, run.id, run, gpus))
        self.ends = {key: sorted(items, key=lambda e: e[:2]) for key, items in ends.items()}

    def first(self, job: JobRequest) -> tuple[float, str, RunningJob] | None:
        """The earliest (seconds, cluster, the job whose end makes room) for `job` whole."""
        best: tuple[float, str, RunningJob] | None = None
        for (cluster, model), items in self.ends.items():
            if job.gpu_model not in (None, model):
                continue
            if job.allowed_clusters is not None and cluster not in job.allowed_clusters:
                continue
            have = self.free.get((cluster, model), 0)
            for ends_in_s, _, run, gpus in items:
                have += gpus
                if have >= job.gpus:
                    if best is None or ends_in_s < best[0]:
                        best = (ends_in_s, cluster, run)
                    break
        return best


def _first_waiting(jobs: tuple[JobRequest, ...], out: Mapping[str, Outcome]) -> list[JobRequest]:
    return [j for j in jobs if out[j.id].status is Status.WAITING][:EXPLAINED]
