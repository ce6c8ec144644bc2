"""Scheduling rounds on the leader, as numbered steps: (0) read the round's input from the
database (`services/scheduling/round_input.py`); (1-8) plan it off the event loop with the
round's time limit (`solver.round_plan.plan_round`, the recipe the simulator runs too); (9) apply
the plan atomically (`services/scheduling/round_apply.py`: jobs that no longer fit an
inventory that moved meanwhile wait for the next round); (10) observe and record it. Before
each round the leader supervises the cross-cluster gangs (start timeouts, lost clusters) and
starts the preemptors whose victims are gone. Time comes from an injected clock."""

from __future__ import annotations

import asyncio
import logging
import math
from contextlib import ExitStack
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from volcano_global import failpoints
from volcano_global.clock import Clock, SystemClock
from volcano_global.db.engine import is_unavailable, reading, transaction
from volcano_global.metrics import Metrics, observe_queue_waits
from volcano_global.scheduler.leader import Leadership
from volcano_global.services.dispatch.supervision import GangOutcome, supervise
from volcano_global.services.scheduling.evictions import start_nominated
from volcano_global.services.scheduling.history import SAMPLE_EVERY_S, take_sample
from volcano_global.services.scheduling.round_apply import RoundResult, apply_plan
from volcano_global.services.scheduling.round_input import (
    RoundContext,
    anything_pending,
    inventory_versions,
    narrow_elastic,
    read_round,
)
from volcano_global.services.scheduling.rounds import record_round
from volcano_global.services.scheduling.timing import duration_model
from volcano_global.services.wakeups import FLEET, ROUNDS
from volcano_global.settings import Settings
from volcano_global.solver import (
    Policy,
    SolveOptions,
    cpsat,  # noqa: F401  loaded with the loop, not in the first round, whose time limit it would eat
    planning,
)
from volcano_global.solver.durations import DurationModel
from volcano_global.solver.gravity import DataMode, DataOptions
from volcano_global.solver.long_work import LongWork
from volcano_global.solver.preemption import Rules
from volcano_global.solver.round_plan import (
    RoundInput,
    RoundOptions,
    RoundPlan,
    has_work,
    plan_round,
    settles_in,
)
from volcano_global.solver.timesharing import TimeSharing

log = logging.getLogger(__name__)
DURATIONS_REFRESH_S = 60.0


@dataclass(frozen=True)
class RoundReport:
    result: RoundResult
    status: str
    gap: float
    seconds: float  # solver time
    wall_seconds: float  # read + plan + apply
    backlog: bool = False  # jobs placed, and more waiting than a round takes or some deferred
    plan: RoundPlan | None = None


class Scheduler:
    def __init__(
        self,
        engine: AsyncEngine,
        sessions: async_sessionmaker[AsyncSession],
        settings: Settings,
        metrics: Metrics | None = None,
        *,
        busy_share: float = 0.5,
        clock: Clock | None = None,
    ) -> None:
        """`busy_share`: the largest share of the process's time rounds may take (in an API
        replica the rest serves requests and streams; a process of its own may take all)."""
        self.clock = clock or SystemClock()
        self.sessions = sessions
        self.busy_share = busy_share
        self.settings = settings
        self.metrics = metrics or Metrics()
        self.leadership = Leadership(engine)
        # Set by submissions, and by commits that may let a job run (`services/wakeups.py`):
        # the wait for the period ends, and so does idling (`_room_changed`).
        self._watching = ExitStack()
        self.wake = self._watching.enter_context(ROUNDS.watch(FLEET))
        self._room_changed = self._watching.enter_context(ROUNDS.watch(FLEET))
        self._last_recorded: tuple[float, int] | None = None  # (monotonic time, pending)
        self._last_start = float("-inf")  # monotonic time the last step began
        self._last_busy = 0.0  # how long it took
        self._last_sample = float("-inf")  # monotonic time of the last history sample
        self._last_gang_sweep = float("-inf")  # monotonic time of the last gang supervision
        self._learnt: tuple[float, DurationModel] | None = None  # (monotonic time, durations)
        # The inventory versions of the last round that had only elastic growth to consider
        # and grew nothing: until they move (or a placement ends, or a queue changes), such a
        # round would find nothing either.
        self._no_growth_at: dict[str, tuple[int, int]] | None = None
        # ... or until this monotonic time, when a narrow job's resize interval ends.
        self._no_growth_until = math.inf

    async def _lead(self) -> bool:
        leading = await self.leadership.acquire()
        self.metrics.leader.set(1 if leading else 0)
        return leading

    async def run_once(self) -> RoundReport | None:
        """One round; None when another replica leads or nothing waits."""
        if not await self._lead():
            return None
        policy = Policy(self.settings.scheduling.policy)
        options = self._options()
        started = self.clock.monotonic()
        data, context = await self._read(policy, options)  # 0
        if data is None or context is None:
            self.metrics.rounds.labels("idle").inc()
            return None
        read = self.clock.monotonic()
        plan = await asyncio.to_thread(plan_round, data, policy, options)  # 1-8
        planned = self.clock.monotonic()
        async with transaction(self.sessions) as session:  # 9
            result = await apply_plan(
                session,
                plan=plan,
                context=context,
                replica_namespace=self.settings.scheduling.data.replica_namespace,
            )
        wall = self.clock.monotonic() - started
        self._after_round(plan, result, context)
        await self._observe(plan, result, wall, (read - started, planned - read))  # 10
        report = RoundReport(
            result,
            plan.decision.status,
            plan.decision.gap,
            plan.decision.solve_seconds,
            wall,
            # More may be placeable now: the round made progress and left work behind. A
            # window full of jobs that cannot be placed is not a backlog (nothing to gain
            # from solving it again at once).
            backlog=bool(result.placed)
            and (
                len(data.waiting) + len(data.beyond) >= options.solve.window
                or bool(result.deferred)
            ),
            plan=plan,
        )
        await self._record(plan, result, wall)
        return report

    def _options(self) -> RoundOptions:
        scheduling = self.settings.scheduling
        preemption = scheduling.preemption
        rules = (
            Rules(
                min_run_s=preemption.min_run_s,
                max_jobs=preemption.max_jobs,
                max_gpus=preemption.max_gpus,
                wait_weight=preemption.wait_weight,
            )
            if preemption.enabled
            else None
        )
        return RoundOptions(
            solve=SolveOptions(
                time_limit_s=scheduling.round_time_limit_s, window=scheduling.window
            ),
            preemption=rules,
            time_sharing=_time_sharing(self.settings),
            hysteresis=planning.Hysteresis(
                scheduling.elastic.min_interval_s, scheduling.elastic.min_growth
            ),
            reserve_after_s=scheduling.reserve_after_s,
            whole_queue=scheduling.whole_queue,
            backfill_limit=scheduling.backfill_limit,
            data=DataOptions(
                mode=DataMode(scheduling.data.mode),
                staging_gbps=scheduling.data.staging_gbps,
                min_staging_gbps=scheduling.data.min_staging_gbps,
                cross_region_margin=scheduling.data.cross_region_margin,
                prefetch=scheduling.data.prefetch,
                replicate_readers=scheduling.data.replicate_readers,
            ),
            long_work=LongWork(scheduling.long_work.long_s, scheduling.long_work.share)
            if scheduling.long_work.enabled
            else None,
        )

    async def _read(
        self, policy: Policy, options: RoundOptions
    ) -> tuple[RoundInput | None, RoundContext | None]:
        """Step 0: the round's input, or (None, None) when it has nothing to do (then the loop
        idles until something moves)."""
        async with transaction(self.sessions) as session:
            if not await self._work(session, policy):
                return None, None  # skip reading the inventory
            data, context = await read_round(
                session,
                window=options.solve.window,
                policy=policy,
                options=options,
                durations=await self._durations(session) if policy.planned else None,
                now=self.clock.now(),
                reads_window_s=self.settings.scheduling.data.reads_window_s,
            )
        if not has_work(data, policy, options):
            self._idle_until_moved(context.versions, settles_in(data, options))
            return None, None
        return data, context

    def _after_round(self, plan: RoundPlan, result: RoundResult, context: RoundContext) -> None:
        """A round that changed nothing and had no waiting job: no growth either until an
        inventory moves or a resize interval ends."""
        if result.nominated:
            failpoints.hit("preempt-evicted")
            self.metrics.preempted.inc(len(result.nominated))
            self.metrics.evicted.inc(len(result.evicted))
            for outcome in result.evicted:
                log.warning("%s %s: %s", outcome.job, outcome.action.lower(), outcome.message)
        changed = result.placed or result.resized or result.nominated
        if plan.waiting or changed:
            self._no_growth_at = None
        else:
            self._idle_until_moved(context.versions, plan.settles_in_s)

    async def _observe(
        self, plan: RoundPlan, result: RoundResult, wall: float, times: tuple[float, float]
    ) -> None:
        self.metrics.rounds.labels("committed").inc()
        self.metrics.round_seconds.observe(wall)
        self.metrics.placed.inc(len(result.placed))
        if result.placed:
            async with reading(self.sessions) as session:
                await observe_queue_waits(session, self.metrics, result.placed)
        self.metrics.deferred.inc(len(result.deferred))
        if result.placed or result.deferred:
            log.info(
                "round %d placed %d jobs, deferred %d (%s, gap %.2f%%; read %.2f s, "
                "plan %.2f s, apply %.2f s)",
                result.generation,
                len(result.placed),
                len(result.deferred),
                plan.decision.status,
                plan.decision.gap * 100,
                times[0],
                times[1],
                wall - sum(times),
            )

    async def _record(self, plan: RoundPlan, result: RoundResult, wall: float) -> None:
        if not self._worth_recording(len(result.placed), result.pending):
            return
        async with transaction(self.sessions) as session:
            await record_round(
                session,
                generation=result.generation,
                wall_seconds=wall,
                solve_seconds=plan.decision.solve_seconds,
                status=plan.decision.status,
                gap=plan.decision.gap,
                placed=len(result.placed),
                pending=result.pending,
                policy=self.settings.scheduling.policy,
                finished_at=self.clock.now(),
            )

    async def _work(self, session: AsyncSession, policy: Policy) -> bool:
        """Whether a round has something to do: a job waits, or (planned policies) an elastic
        job runs narrow and the inventories moved since a round last found no room to grow it
        (a job ending shows there as the GPUs it frees), something else may have made room (a
        placement ended before its pods ran, a queue's quota changed), or its resize interval
        ended."""
        if self._room_changed.is_set():
            self._room_changed.clear()  # before the snapshot: a later change sets it again
            self._no_growth_at = None
        if await anything_pending(session):
            return True
        if not policy.planned or not await narrow_elastic(session):
            return False
        if self.clock.monotonic() >= self._no_growth_until:
            return True
        return await inventory_versions(session) != self._no_growth_at

    def _idle_until_moved(self, versions: dict[str, tuple[int, int]], wait: float | None) -> None:
        """A round found no growth: none until an inventory moves or, for a job that waits
        out its resize interval (`wait` seconds), until the interval ends."""
        self._no_growth_at = dict(versions)
        self._no_growth_until = math.inf if wait is None else self.clock.monotonic() + wait

    async def _durations(self, session: AsyncSession) -> DurationModel:
        """What finished jobs ran, read again at most once a DURATIONS_REFRESH_S."""
        now = self.clock.monotonic()
        if self._learnt is None or now - self._learnt[0] >= DURATIONS_REFRESH_S:
            self._learnt = (now, await duration_model(session))
        return self._learnt[1]

    def _worth_recording(self, placed: int, pending: int) -> bool:
        """Rounds that admit nothing and change nothing repeat every period while jobs wait:
        keep one of them a minute, and every round that placed a job or moved the backlog."""
        now = self.clock.monotonic()
        last = self._last_recorded
        if placed or last is None or last[1] != pending or now - last[0] > 60:
            self._last_recorded = (now, pending)
            return True
        return False

    async def supervise(self) -> list[GangOutcome]:
        """Withdraw or requeue gangs that did not start or lost a cluster, and start the
        preemptors whose victims are gone (leader only)."""
        if not await self._lead():
            return []
        outcomes = await self._sweep_gangs()
        try:
            async with transaction(self.sessions) as session:
                started = await start_nominated(
                    session,
                    timeout_s=self.settings.scheduling.preemption.start_timeout_s,
                    now=self.clock.now(),
                )
        except Exception as exc:  # a defect in one nomination must not stop the rounds behind it
            if is_unavailable(exc):
                raise  # the database restarting: the loop retries, without a traceback
            log.exception("starting the nominated preemptors failed")
            started = []
        for name in started:
            log.info("%s placed: the jobs it preempted are gone", name)
        for outcome in outcomes:
            self.metrics.gang.labels(outcome.action).inc()
            log.warning("%s %s: %s", outcome.job, outcome.action.lower(), outcome.message)
        return outcomes

    async def _sweep_gangs(self) -> list[GangOutcome]:
        """Supervise the gangs, at most once a `gang_sweep_interval_s`: its timeouts are
        minutes and a lost cluster takes a heartbeat timeout to notice, while under load
        rounds come every `min_interval_s` and each sweep read every active placement (at
        200 jobs/s a fifth of the shared buffers Postgres touched, though no measurable part
        of its CPU; docs/benchmarks.md, session 15)."""
        now = self.clock.monotonic()
        if now - self._last_gang_sweep < self.settings.scheduling.gang_sweep_interval_s:
            return []
        self._last_gang_sweep = now
        async with transaction(self.sessions) as session:
            return await supervise(
                session,
                default_timeout_s=self.settings.scheduling.gang_start_timeout_s,
                now=self.clock.now(),
            )

    async def step(self) -> None:
        """What the background task runs: supervision and a round, then (unless a backlog is
        being worked off: jobs placed, and a full window or jobs deferred) wait for a wake-up
        or the period.
        Rounds start at least `min_interval_s` apart, so a burst of submissions is taken in
        batches (an isolated submission is scheduled at once), and at least the last step's
        duration over `busy_share` apart, so rounds on a large inventory cannot take an API
        replica's whole process."""
        spacing = max(self.settings.scheduling.min_interval_s, self._last_busy / self.busy_share)
        pause = self._last_start + spacing - self.clock.monotonic()
        if pause > 0:
            await asyncio.sleep(pause)
        self._last_start = self.clock.monotonic()
        await self.supervise()
        report = await self.run_once()
        await self.sample()
        self._last_busy = self.clock.monotonic() - self._last_start
        if report is not None and report.backlog:
            return  # the next round as soon as spacing allows, not after the period
        try:
            await asyncio.wait_for(self.wake.wait(), timeout=self.settings.scheduling.interval_s)
        except TimeoutError:
            pass
        self.wake.clear()

    async def sample(self) -> bool:
        """The history view's sample of the federation (leader only), at most once a
        SAMPLE_EVERY_S whether or not a round ran: an idle fleet's allocation is history too."""
        due = self.clock.monotonic() - self._last_sample >= SAMPLE_EVERY_S
        if not due or not self.leadership.leading:
            return False
        self._last_sample = self.clock.monotonic()
        try:
            async with transaction(self.sessions) as session:
                await take_sample(session, now=self.clock.now())
        except Exception as exc:  # a missed sample is a gap in a chart, not a reason to stop
            if is_unavailable(exc):
                raise  # the database restarting: the loop retries, without a traceback
            log.exception("sampling the federation for its history failed")
            return False
        return True

    async def stop(self) -> None:
        self._watching.close()
        await self.leadership.release()
        self.metrics.leader.set(0)


def _time_sharing(settings: Settings) -> TimeSharing | None:
    """The time-sharing rule's limits from the settings (None: off)."""
    given = settings.scheduling.time_sharing
    if not given.enabled:
        return None
    return TimeSharing(
        min_run_s=given.min_run_s,
        max_jobs=given.max_jobs,
        max_gpus=given.max_gpus,
        max_lost_s=given.max_lost_s,
        wait_weight=given.wait_weight,
    )
