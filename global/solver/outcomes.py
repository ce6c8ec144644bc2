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
    RunningJob,
    Snapshot,
)
from volcano_global.solver.preemption import (
    Eviction,
    Rules,
    Standing,
    lost_gpu_hours,
    may_take,
    victim_order,
)

log = logging.getLogger(__name__)
EXPLAINED = 16  # waiting jobs per round told when room is expected
PREEMPTORS = 1  # of them, the first that may evict is asked whether it will (a preempt)


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
    left: Snapshot,
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
    hold_in = dict(decision.reserved_in_s)
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
            at = now + timedelta(seconds=hold_in[d.job_id]) if d.job_id in hold_in else None
            out[d.job_id] = Outcome(d.job_id, status, d.reason or "waiting", at)
    for job_id, why in set_aside.items():
        out[job_id] = Outcome(job_id, Status.SET_ASIDE, why)
    left = _left(left, decision, evictions, excluded)
    if not left.running:
        return out
    room = _Room(left)  # both steps read it: 100 clusters' 62,500 leaves summed once
    out |= _will_preempt(left, out, rules, queues, now, room)
    out |= _room_expected(left, out, now, room)
    return out


def _where(d: JobDecision) -> str:
    return "placed: " + "; ".join(f"{s.pods} pods in {s.cluster}" for s in d.shares)


def _left(
    left: Snapshot, decision: Decision, evictions: list[Eviction], excluded: Collection[str]
) -> Snapshot:
    """What the round leaves (`left`: free capacity after its starts), less the running jobs
    it evicts or resizes, and the jobs still waiting in queue order."""
    gone = {v.id for e in evictions for v in e.victims} | set(excluded)
    waiting = {d.job_id for d in decision.jobs if not d.admitted}
    waiting -= {e.preemptor for e in evictions} | set(excluded)
    return replace(
        left,
        running=tuple(r for r in left.running if r.id not in gone),
        jobs=tuple(j for j in left.jobs if j.id in waiting),
    )


def _will_preempt(
    left: Snapshot,
    out: Mapping[str, Outcome],
    rules: Rules | None,
    queues: Mapping[str, Standing],
    now: datetime,
    room: _Room,
) -> dict[str, Outcome]:
    """The first waiting job that may evict, if it would evict were it not for the minimum
    run time: whom, and when the last of them has run it (the eviction a later round then
    makes, if nothing else changed). Weighed by GPU counts per cluster (`_later_victims`),
    not by `preempt`'s placements: for one job on a large fleet those cost as much as the
    round's own evictions."""
    if rules is None or rules.min_run_s <= 0 or not left.running:
        return {}
    first = [j for j in _first_waiting(left.jobs, out) if j.may_evict_for][:PREEMPTORS]
    if not first or not any(r.run_s < rules.min_run_s for r in left.running):
        return {}  # the evictions of step 7 already weighed every job old enough
    job = first[0]
    victims = _later_victims(job, left, rules, queues, room)
    wait = max((rules.min_run_s - v.run_s for v in victims), default=0.0)
    if wait <= 0 or not _worth_waiting_for(job, victims, wait, room, rules):
        return {}  # not held back by the minimum run time, or not worth evicting then
    names = ", ".join(v.name or v.id for v in victims)
    reason = (
        f"{out[job.id].reason}; will preempt {names} once "
        f"{'it has' if len(victims) == 1 else 'they have'} run "
        f"{rules.min_run_s:g} s: in about {wait:,.0f} s"
    )
    at = now + timedelta(seconds=wait)
    named = tuple(v.name or v.id for v in victims)
    return {job.id: Outcome(job.id, Status.WILL_PREEMPT, reason, at, named)}


def _later_victims(
    job: JobRequest,
    left: Snapshot,
    rules: Rules,
    queues: Mapping[str, Standing],
    room: _Room,
) -> tuple[RunningJob, ...]:
    """The running jobs the preemption rule would take for `job` in one cluster, counting
    GPUs, with no minimum run time and within the round's caps: in each cluster and model
    the job may use, candidates in victim order until enough GPUs are free; of the clusters,
    the set whose highest victim priority is lowest, then the fewest GPU-hours lost, then the
    fewest victims (the rule's keys)."""
    anytime = replace(rules, min_run_s=0.0)
    candidates = sorted(
        (r for r in left.running if may_take(job, r, anytime, queues) is not None),
        key=victim_order,
    )
    best: tuple[tuple[float, ...], tuple[RunningJob, ...]] | None = None
    for (cluster, model), free in room.free.items():
        if job.gpu_model not in (None, model):
            continue
        if job.allowed_clusters is not None and cluster not in job.allowed_clusters:
            continue
        taken: list[RunningJob] = []
        for victim in candidates:
            if free >= job.gpus or len(taken) >= rules.max_jobs:
                break
            held = sum(g for c, m, g in victim.gpus if (c, m) == (cluster, model))
            if held:
                taken.append(victim)
                free += held
        if free < job.gpus or not taken or sum(v.total_gpus for v in taken) > rules.max_gpus:
            continue
        key = (
            max(v.priority for v in taken),
            round(sum(lost_gpu_hours(v) for v in taken), 6),
            len(taken),
        )
        if best is None or key < best[0]:
            best = (key, tuple(taken))
    return () if best is None else best[1]


def _worth_waiting_for(
    job: JobRequest, victims: tuple[RunningJob, ...], wait: float, room: _Room, rules: Rules
) -> bool:
    """Step 5 of the preemption rule, then: the job's GPUs x its wait for room from that
    moment on (times the weight) against the work its victims will have to lose."""
    if rules.wait_weight is None:
        return True
    first = room.first(job)
    after = float("inf") if first is None else max(first[0] - wait, 0.0)
    lost = sum(lost_gpu_hours(v, later_s=wait) for v in victims)
    return job.gpus * after / 3600.0 * rules.wait_weight >= lost


def _room_expected(
    left: Snapshot, out: Mapping[str, Outcome], now: datetime, room: _Room
) -> dict[str, Outcome]:
    """For the first EXPLAINED jobs still waiting: when running work is expected to leave
    enough GPUs of its model free in one cluster it may use, and whose end that is (GPU
    counts, not nodes: an estimate, and the word says so)."""
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
