"""One scheduling round as a pure function: `plan_round(RoundInput, policy, options) ->
RoundPlan`. The server's scheduling loop (`services/scheduling/`) reads the input from its
database and applies the plan in a transaction; the simulator (`simulation/engine.py`) builds
the input from its virtual fleet and applies the plan to it. Both run this recipe, so they
decide alike by construction.

The recipe, in the order it runs (Kueue's cycle has the same shape: heads, snapshot, nominate,
admit, requeue, with an explicit status per entry):

1. **Order** the waiting jobs (steps 1-1c: `round_order.py`): priority, weighted fair share
   between queues, then submission time - or, for a planned policy, the jobs owed a
   reservation and then the least expected service first; a planned policy is also told how
   long each is likely to run.
   1b. **Data**: a job that reads data may use the clusters that hold it, and those where
   staging it ends sooner than a holder is expected to have room (`gravity.steer`).
   1c. **Long work**: a job expected (by its runningEstimate) to run for hours waits while
   long work holds its share of the fleet and shorter jobs wait (`long_work.keep_room`).
   1d. **Beyond the window**: the solver plans the first `window` jobs; each job beyond it
   gets a candidate cluster from a cluster-level first fit, or no room now and why
   (`whole_queue.assign`; off with `RoundOptions.whole_queue`).
2. **Standing** of every queue (held, deserved, reclaimable), when preemption is on.
3. **Shrinks**: running elastic jobs give back units to waiting jobs that may take them
   (planned policies with preemption on); the capacity the solver sees includes them.
4. **Growth**: what running elastic jobs could add (planned policies), after every waiting
   job and at the lowest priority among them.
5. **Solve**: the placement engine (`solve`) over the free capacity, links, quotas and running
   jobs; a round the engine fails on still ends, every job waiting with the reason.
   5b. **Backfill**: each candidate beyond the window, whole in one cluster on what the
   window's starts left, within the round's reservations (`whole_queue.backfill`). Steps 3,
   7 and 7c weigh the window's jobs only.
   5c. **Parted jobs**: a HyperJob whose children differ (GPU model, size, clusters named)
   is not in the model: taken out of the line before 1d, placed child by child, all or none,
   on what 5 and 5b left, in queue order, within the reservations (`parts.placed`).
6. **Grows**: the growth the solver admitted and whose new set of clusters is link-safe.
   6b (before it; `round_data.py`). **Staging**: every start that lands where its data is
   not gets its copies, reserved on the links the starts left (`copies.stage`); one that
   cannot stage now waits.
   Prefetch: the copies fetched for waiting jobs (`DataOptions.prefetch`), on what the
   starts and their copies left, never into a cluster a copy already brings the data to.
7. **Evictions**: for the jobs still waiting, the running gangs they may evict
   (`preemption.preempt`) over what the round leaves free; an elastic job the round resizes is
   no victim.
   7b (`round_data.py`). **A preemptor's copies** where it will start (`copies.stage`), on
   what the starts, their copies, the prefetches and the preemptors' splits left, never into
   a cluster a copy of the round already brings the data to; or no eviction for it.
   7c. **Time-sharing**: for the jobs still waiting, the running gangs of time-sharing queues
   that received the most GPU-time and ran their quantum yield to them
   (`timesharing.demote`), over what the starts and evictions leave.
   7d (last). **Replication**: a dataset read lately by enough jobs gets a copy, without
   GPUs, in each region that holds none (`replication.replicate`; off unless
   `DataOptions.replicate_readers`), on what every job of the round (starts, their copies,
   prefetches, grows, preemptors and their copies) left of the links: a replica never takes
   bandwidth a job needs, nor copies data a copy of the round already brings into a region.
8. **Outcomes**: one typed outcome per waiting job considered - started, reserved, preempting,
   will preempt (and whom, and when), waiting (with the reason, and when room is expected),
   set aside.

Pure: no clock (the input carries `now`), no I/O, inputs never mutated.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime

from volcano_global.solver import (
    SolveOptions,
    failed,
    gravity,
    parts,
    planning,
    shrinking,
    solve_with_pools,
    whole_queue,
)
from volcano_global.solver import copies as copies_
from volcano_global.solver import outcomes as explain
from volcano_global.solver.copies import Copy
from volcano_global.solver.data import DataNeeds
from volcano_global.solver.durations import DurationModel
from volcano_global.solver.fair_share import QueueNode, quota_states
from volcano_global.solver.free_pools import remaining
from volcano_global.solver.long_work import LongWork
from volcano_global.solver.model import (
    ClusterCapacity,
    Decision,
    JobDecision,
    JobRequest,
    LinkBandwidth,
    LinkState,
    Policy,
    RunningJob,
    Snapshot,
)
from volcano_global.solver.outcomes import Outcome, Status
from volcano_global.solver.packing import Pools
from volcano_global.solver.preemption import (
    Eviction,
    Rules,
    Standing,
    preempt,
    standings,
)
from volcano_global.solver.replication import Popularity
from volcano_global.solver.round_data import preemptor_copies, replicas, staging, with_data
from volcano_global.solver.round_order import in_line, order, window
from volcano_global.solver.round_sharing import demotions
from volcano_global.solver.timesharing import TimeSharing

log = logging.getLogger(__name__)
__all__ = [
    "Grow",
    "Outcome",
    "RoundInput",
    "RoundOptions",
    "RoundPlan",
    "Status",
    "Waiting",
    "has_work",
    "order",
    "plan_round",
    "settles_in",
    "window",
]


@dataclass(frozen=True)
class Waiting:
    """A waiting job as the round reads it: the solver's request (without time: step 1 adds
    it), when it was submitted, and the user's run-time estimate if any."""

    request: JobRequest
    submitted_at: datetime
    estimate_s: float | None = None


@dataclass(frozen=True)
class RoundInput:
    """Everything a round decides from."""

    now: datetime
    clusters: tuple[ClusterCapacity, ...]  # free capacity per leaf domain and GPU model
    links: tuple[LinkState, ...] = ()
    waiting: tuple[Waiting, ...] = ()
    tree: Mapping[str, QueueNode] = field(default_factory=dict)  # queues, with held and pending
    running: tuple[RunningJob, ...] = ()  # for planned policies and preemption
    elastic: tuple[planning.ElasticRun, ...] = ()  # running elastic jobs (planned policies)
    durations: DurationModel = field(default_factory=DurationModel)
    fleet_gpus: int = 0  # what fair shares divide (reclaim)
    reclaimable: Mapping[str, bool] = field(default_factory=dict)
    set_aside: Mapping[str, str] = field(default_factory=dict)  # waiting, not modelled: why
    # What waiting jobs and running elastic jobs read (by job id).
    data: Mapping[str, DataNeeds] = field(default_factory=dict)
    copying: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # data -> bound for
    regions: Mapping[str, str] = field(default_factory=dict)  # cluster -> region, where known
    # Job id -> clusters its data is not prefetched into now: a copy there failed lately (its
    # backoff runs), or the cluster's agent cannot run copies without a share.
    no_prefetch: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # Cluster -> why no waiting job's data is copied into it now (copies into it keep failing,
    # whichever jobs they were for: `services/data/copy_backoff.broken_destinations`).
    no_copies_into: Mapping[str, str] = field(default_factory=dict)
    # Cluster -> why: copies into it kept failing and their backoff ended; one copy (the first
    # job's the round plans, step 6b) tries again, the jobs after it are told why not theirs.
    probe_copies_into: Mapping[str, str] = field(default_factory=dict)
    # Datasets read lately, as the caller counts them (`replication`; empty: the round counts
    # its waiting readers only).
    popularity: Mapping[str, Popularity] = field(default_factory=dict)
    # Data source -> the clusters no replica of it goes into now (one failed there lately).
    no_replicas: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # The queues that time-share (`timesharing`): name -> quantum, in seconds.
    time_sharing: Mapping[str, float] = field(default_factory=dict)
    # Waiting jobs not read in full (the server's fast pass found no room for them, step 1d
    # of `whole_queue`), with why they wait.
    beyond: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RoundOptions:
    solve: SolveOptions = field(default_factory=SolveOptions)
    preemption: Rules | None = None  # None: no preemption, reclaim or shrinks
    hysteresis: planning.Hysteresis = field(default_factory=planning.Hysteresis)
    reserve_after_s: float = planning.RESERVE_AFTER_S
    data: gravity.DataOptions = field(default_factory=gravity.DataOptions)
    long_work: LongWork | None = None  # None: long work may take every free GPU
    # Time-sharing's limits, for the queues that opt in (None: off, whatever queues say).
    time_sharing: TimeSharing | None = field(default_factory=TimeSharing)
    # Every waiting job considered (`whole_queue`): the jobs beyond the window backfill whole
    # where they fit; False: they wait, "outside the window" (as before step 1d).
    whole_queue: bool = True
    backfill_limit: int = 1000  # jobs beyond the window a round may start


@dataclass(frozen=True)
class Grow:
    """A running elastic job adds `decision`'s units; once grown it reserves `links`."""

    job_id: str
    decision: JobDecision
    links: tuple[LinkBandwidth, ...]


@dataclass(frozen=True)
class RoundPlan:
    decision: Decision  # the solver's answer (status, gap, holds), growth included
    starts: tuple[JobDecision, ...] = ()  # waiting jobs placed, in the solver's order
    grows: tuple[Grow, ...] = ()
    shrinks: tuple[planning.Shrink, ...] = ()
    evictions: tuple[Eviction, ...] = ()
    outcomes: Mapping[str, Outcome] = field(default_factory=dict)  # by waiting job id
    # Seconds until the first narrow elastic job's resize interval ends (None: none waits).
    settles_in_s: float | None = None
    staging: Mapping[str, tuple[Copy, ...]] = field(default_factory=dict)  # by start
    # Copies for waiting jobs, started now without GPUs (`DataOptions.prefetch`).
    prefetch: Mapping[str, tuple[Copy, ...]] = field(default_factory=dict)
    # Copies of popular datasets ahead of demand, belonging to no job (step 7d).
    replicas: tuple[Copy, ...] = ()

    @property
    def waiting(self) -> int:
        """Waiting jobs considered (growth is not a waiting job)."""
        return len(self.outcomes)

    def admitted(self) -> tuple[JobDecision, ...]:
        """Every admitted decision, starts and growth, in the solver's order."""
        grown = {g.job_id for g in self.grows}
        started = {d.job_id for d in self.starts}
        return tuple(
            d
            for d in self.decision.jobs
            if d.admitted and (d.job_id in started or d.job_id in grown)
        )


def plan_round(
    data: RoundInput, policy: Policy = Policy.CPSAT, options: RoundOptions | None = None
) -> RoundPlan:
    """The round (module docstring), step by step."""
    options = options or RoundOptions()
    rules = options.preemption
    waiting, steered, held_back = in_line(data, policy, options)  # 1, 1b, 1c
    modelled, parted = parts.split_off(waiting)  # placed child by child in step 5c
    line = whole_queue.cut(data, modelled, options, planned=policy.planned)  # 1d
    queues = _standings(data) if rules is not None or data.time_sharing else {}  # 2
    shrinks, clusters = _shrinks(data, line.window, queues, policy, options)  # 3
    growth = _growth(data, waiting, shrinks, policy, options)  # 4
    requests = tuple(line.window) + tuple(growth)
    snapshot = Snapshot(
        clusters,
        data.links,
        requests,
        quota_states(data.tree, {r.queue for r in requests}),
        data.running if policy.planned or rules is not None or data.time_sharing else (),
    )
    decision, solved = _solve(snapshot, policy, options.solve)  # 5
    evicting = rules is not None or bool(data.time_sharing)
    filled = whole_queue.backfilled(  # 5b
        snapshot, decision, line, data, evicting=evicting, solved=solved
    )
    filled = parts.placed(  # 5c
        snapshot, filled, line, parted, data, evicting=evicting, solved=solved
    )
    decision = filled.decision
    growing = {g.id for g in growth}
    staged = staging(data, decision, growing, steered, options)  # 6b
    decision, starts, steered = staged.decision, staged.starts, staged.steered
    grows = _grows(data, decision, growth, staged.links)  # 6
    left, pools = _left(snapshot, decision, filled, rules)
    if (rules is not None or data.time_sharing) and data.data:
        copied = staged.copies | staged.fetches
        left = replace(left, links=copies_.reserved(left.links, copied, options.data))
    evictions = _evictions(left, pools, decision, shrinks, growing, queues, rules)  # 7
    evictions, preempting, unevicted = preemptor_copies(  # 7b
        data, evictions, left.links, steered, options, staged.bound
    )
    resizing = growing | {cut.job_id for cut in shrinks}
    evictions += demotions(left, decision, evictions, resizing, queues, data, options)  # 7c
    replicated = replicas(data, staged, grows, evictions, preempting, options)  # 7d
    outcomes = explain.outcomes(  # 8
        left,
        decision,
        set_aside=data.set_aside,
        evictions=evictions,
        rules=rules,
        queues=queues,
        now=data.now,
        excluded=growing,
    )
    return RoundPlan(
        decision,
        starts=starts,
        grows=grows,
        shrinks=tuple(shrinks),
        evictions=tuple(evictions),
        outcomes=with_data(outcomes, steered, staged.copies | preempting, data.now, unevicted)
        | held_back
        | {k: Outcome(k, Status.WAITING, why) for k, why in data.beyond.items()},
        settles_in_s=settles_in(data, options),
        staging=staged.copies | preempting,
        prefetch=staged.fetches,
        replicas=replicated,
    )


def _left(
    snapshot: Snapshot, decision: Decision, filled: whole_queue.Filled, rules: Rules | None
) -> tuple[Snapshot, Pools | None]:
    """What the round's starts and growth leave: where evictions and explanations look (the
    pools of step 5b, unless staging turned a start away since), and those pools when they
    hold it (step 7 places on them instead of building 100 clusters' pools again)."""
    if filled.pools is not None and filled.decision is decision:
        return filled.left(snapshot), filled.pools
    if snapshot.running or rules is not None or filled.beyond:
        return remaining(snapshot, decision, filled.beyond), None
    return snapshot, None


def has_work(data: RoundInput, policy: Policy, options: RoundOptions) -> bool:
    """Whether a round has anything to decide: a job waits (or is set aside, to be told
    why), or a running elastic job could grow."""
    if data.waiting or data.set_aside or data.beyond:
        return True
    return bool(_growth(data, [], [], policy, options))


def _standings(data: RoundInput) -> dict[str, Standing]:
    """Step 2: every queue's GPUs held and deserved, and whether it is reclaimable."""
    return standings(data.fleet_gpus, data.tree, data.reclaimable)


def _shrinks(
    data: RoundInput,
    waiting: list[JobRequest],
    queues: Mapping[str, Standing],
    policy: Policy,
    options: RoundOptions,
) -> tuple[list[planning.Shrink], tuple[ClusterCapacity, ...]]:
    """Step 3: the units elastic jobs give back (`shrinking.shrinks`), and the capacity the
    solver sees with them free."""
    if not policy.planned or options.preemption is None or not data.elastic:
        return [], data.clusters
    free: dict[tuple[str, str | None], int] = defaultdict(int)
    models: dict[str, set[str]] = defaultdict(set)
    for state in data.clusters:
        for leaf in state.leaves:
            free[(state.name, leaf.gpu_model)] += leaf.free_gpus
            models[state.name].add(leaf.gpu_model)
    cuts = shrinking.shrinks(
        waiting,
        list(data.elastic),
        free_gpus=dict(free),
        cluster_models={c: tuple(sorted(m)) for c, m in models.items()},
        rules=options.preemption,
        queues=queues,
    )
    runs = {run.request.id: run for run in data.elastic}
    pods = [p for cut in cuts for p in runs[cut.job_id].given_back(cut)]
    return cuts, planning.freed(data.clusters, pods)


def _growth(
    data: RoundInput,
    waiting: list[JobRequest],
    shrinks: list[planning.Shrink],
    policy: Policy,
    options: RoundOptions,
) -> list[JobRequest]:
    """Step 4: what running elastic jobs could add (`planning.growth`); a job that gives back
    units does not also grow; a job that reads data grows only where its data is (growth
    is never staged)."""
    if not policy.planned or not data.elastic:
        return []
    giving = {s.job_id for s in shrinks}
    growth = planning.growth(
        [r for r in data.elastic if r.request.id not in giving],
        lowest_priority=min((r.priority for r in waiting), default=None),
        widen=not any(r.due for r in waiting),
        hysteresis=options.hysteresis,
    )
    if options.data.mode is gravity.DataMode.OBLIVIOUS:
        return growth
    return [gravity.where_held(g, data.data.get(g.id)) for g in growth]


def _solve(
    snapshot: Snapshot, policy: Policy, options: SolveOptions
) -> tuple[Decision, Pools | None]:
    """Step 5, and the pools it packed into (None: none to hand on). A round the engine fails
    on still ends: every job waits with the reason."""
    try:
        return solve_with_pools(snapshot, policy, options)
    except Exception as exc:  # an inventory the model refuses
        log.exception("scheduling round failed")
        reason = f"the scheduling round failed: {type(exc).__name__}: {exc}"[:500]
        return failed(policy, snapshot.jobs, reason), None


def _grows(
    data: RoundInput,
    decision: Decision,
    growth: list[JobRequest],
    links: tuple[LinkState, ...],
) -> tuple[Grow, ...]:
    """Step 6: the admitted growth whose new set of clusters is link-safe
    (`planning.grown_links`) on what the round's starts and their staging left of the
    links, with the bandwidth the grown job reserves."""
    if not growth:
        return ()
    growing = {g.id for g in growth}
    admitted = tuple(d for d in decision.jobs if d.admitted and d.job_id in growing)
    links = planning.grown_links(
        admitted,
        list(data.elastic),
        links,
        {run.request.id: run.links for run in data.elastic},
    )
    return tuple(
        Grow(d.job_id, d, links[d.job_id] or ())
        for d in admitted
        if links.get(d.job_id) is not None
    )


def _evictions(
    left: Snapshot,
    pools: Pools | None,
    decision: Decision,
    shrinks: list[planning.Shrink],
    growing: set[str],
    queues: Mapping[str, Standing],
    rules: Rules | None,
) -> list[Eviction]:
    """Step 7: `preemption.preempt` over what the decision leaves free (`left`, and its
    `pools` when step 5b built them: the evictions change them, no later step reads them);
    a running elastic job the round resizes (gives back units, or grows) is no victim."""
    if rules is None:
        return []
    grown = {d.job_id for d in decision.jobs if d.admitted and d.job_id in growing}
    resizing = {cut.job_id for cut in shrinks} | grown
    left = replace(left, running=tuple(r for r in left.running if r.id not in resizing))
    try:
        return preempt(left, decision, rules=rules, queues=dict(queues), pools=pools)
    except Exception:  # a defect: the round's placements still go ahead
        log.exception("choosing the round's evictions failed")
        return []


def settles_in(data: RoundInput, options: RoundOptions) -> float | None:
    """Seconds until the first narrow elastic job's resize interval ends (None: none
    waits): until then an idle loop may skip rounds, after it one may grow the job."""
    interval = options.hysteresis.min_interval_s
    return min(
        (interval - r.since_s for r in data.elastic if r.growable > 0 and r.since_s < interval),
        default=None,
    )
