"""Scheduling rounds: on the leader, take a consistent snapshot, solve off the event loop with
the round's time limit, commit atomically (jobs that no longer fit an inventory that moved
meanwhile wait for the next round). Before each round the leader supervises the cross-cluster
gangs (start timeouts, lost clusters)."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from contextlib import ExitStack
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from volcano_global import failpoints
from volcano_global.db.base import utcnow
from volcano_global.db.engine import reading, transaction
from volcano_global.metrics import Metrics, observe_queue_waits
from volcano_global.scheduler.leader import Leadership
from volcano_global.services.dispatch.supervision import GangOutcome, supervise
from volcano_global.services.scheduling.commit import RoundResult, commit_round
from volcano_global.services.scheduling.evictions import choose_evictions, start_nominated
from volcano_global.services.scheduling.rounds import record_round
from volcano_global.services.scheduling.snapshot import (
    RoundContext,
    anything_pending,
    build_snapshot,
    inventory_versions,
    narrow_elastic,
)
from volcano_global.services.scheduling.timing import duration_model
from volcano_global.services.wakeups import FLEET, ROUNDS
from volcano_global.settings import Settings
from volcano_global.solver import (
    Policy,
    SolveOptions,
    cpsat,  # noqa: F401  loaded with the loop, not in the first round, whose time limit it would eat
    failed,
    planning,
    solve,
)
from volcano_global.solver.durations import DurationModel
from volcano_global.solver.preemption import Rules

log = logging.getLogger(__name__)
DURATIONS_REFRESH_S = 60.0


@dataclass(frozen=True)
class RoundReport:
    result: RoundResult
    status: str
    gap: float
    seconds: float  # solver time
    wall_seconds: float  # snapshot + solve + commit
    backlog: bool = False  # jobs placed, and more waiting than a round takes or some deferred


class Scheduler:
    def __init__(
        self,
        engine: AsyncEngine,
        sessions: async_sessionmaker[AsyncSession],
        settings: Settings,
        metrics: Metrics | None = None,
        *,
        busy_share: float = 0.5,
    ) -> None:
        """`busy_share`: the largest share of the process's time rounds may take (in an API
        replica the rest serves requests and streams; a process of its own may take all)."""
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
        options = SolveOptions(
            time_limit_s=self.settings.scheduling.round_time_limit_s,
            window=self.settings.scheduling.window,
        )
        preemption = self.settings.scheduling.preemption
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
        elastic = self.settings.scheduling.elastic
        started = time.perf_counter()
        async with transaction(self.sessions) as session:
            policy = Policy(self.settings.scheduling.policy)
            if not await self._work(session, policy):
                self.metrics.rounds.labels("idle").inc()  # skip reading the inventory
                return None
            snapshot, context = await build_snapshot(
                session,
                window=options.window,
                policy=policy,
                durations=await self._durations(session) if policy.planned else None,
                reserve_after_s=self.settings.scheduling.reserve_after_s,
                preemption=rules,
                hysteresis=planning.Hysteresis(elastic.min_interval_s, elastic.min_growth),
            )
        if not snapshot.jobs and not context.unmodelled:
            self._idle_until_moved(context)
            self.metrics.rounds.labels("idle").inc()
            return None
        read = time.perf_counter()
        try:
            decision = await asyncio.to_thread(solve, snapshot, policy, options)
        except Exception as exc:  # an inventory the model refuses: the round still ends
            log.exception("scheduling round failed")
            reason = f"the scheduling round failed: {type(exc).__name__}: {exc}"[:500]
            decision = failed(policy, snapshot.jobs, reason)
        evictions = (
            await asyncio.to_thread(choose_evictions, snapshot, decision, context, rules)
            if rules is not None
            else []
        )
        solved = time.perf_counter()
        async with transaction(self.sessions) as session:
            result = await commit_round(
                session, decision=decision, context=context, evictions=evictions
            )
        if result.nominated:
            failpoints.hit("preempt-evicted")
            self.metrics.preempted.inc(len(result.nominated))
            self.metrics.evicted.inc(len(result.evicted))
            for outcome in result.evicted:
                log.warning("%s %s: %s", outcome.job, outcome.action.lower(), outcome.message)
        wall = time.perf_counter() - started
        waiting = any(planning.grown_job(j.id) is None for j in snapshot.jobs)
        changed = result.placed or result.resized or result.nominated or context.unmodelled
        if waiting or changed:
            self._no_growth_at = None
        else:
            self._idle_until_moved(context)
        self.metrics.rounds.labels("committed").inc()
        self.metrics.round_seconds.observe(wall)
        self.metrics.placed.inc(len(result.placed))
        if result.placed:
            async with reading(self.sessions) as session:
                await observe_queue_waits(session, self.metrics, result.placed)
        self.metrics.deferred.inc(len(result.deferred))
        if result.placed or result.deferred:
            log.info(
                "round %d placed %d jobs, deferred %d (%s, gap %.2f%%; snapshot %.2f s, "
                "solve %.2f s, commit %.2f s)",
                result.generation,
                len(result.placed),
                len(result.deferred),
                decision.status,
                decision.gap * 100,
                read - started,
                solved - read,
                wall - (solved - started),
            )
        report = RoundReport(
            result,
            decision.status,
            decision.gap,
            decision.solve_seconds,
            wall,
            # More may be placeable now: the round made progress and left work behind. A
            # window full of jobs that cannot be placed is not a backlog (nothing to gain
            # from solving it again at once).
            backlog=bool(result.placed)
            and (len(snapshot.jobs) >= options.window or bool(result.deferred)),
        )
        if self._worth_recording(len(result.placed), result.pending):
            async with transaction(self.sessions) as session:
                await record_round(
                    session,
                    generation=result.generation,
                    wall_seconds=wall,
                    solve_seconds=decision.solve_seconds,
                    status=decision.status,
                    gap=decision.gap,
                    placed=len(result.placed),
                    pending=result.pending,
                    policy=self.settings.scheduling.policy,
                    finished_at=utcnow(),
                )
        return report

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
        if time.monotonic() >= self._no_growth_until:
            return True
        return await inventory_versions(session) != self._no_growth_at

    def _idle_until_moved(self, context: RoundContext) -> None:
        """A round found no growth: none until an inventory moves or, for a job that waits
        out its resize interval, until the interval ends."""
        self._no_growth_at = dict(context.versions)
        wait = context.settles_in_s
        self._no_growth_until = math.inf if wait is None else time.monotonic() + wait

    async def _durations(self, session: AsyncSession) -> DurationModel:
        """What finished jobs ran, read again at most once a DURATIONS_REFRESH_S."""
        now = time.monotonic()
        if self._learnt is None or now - self._learnt[0] >= DURATIONS_REFRESH_S:
            self._learnt = (now, await duration_model(session))
        return self._learnt[1]

    def _worth_recording(self, placed: int, pending: int) -> bool:
        """Rounds that admit nothing and change nothing repeat every period while jobs wait:
        keep one of them a minute, and every round that placed a job or moved the backlog."""
        now = time.monotonic()
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
        async with transaction(self.sessions) as session:
            outcomes = await supervise(
                session, default_timeout_s=self.settings.scheduling.gang_start_timeout_s
            )
        try:
            async with transaction(self.sessions) as session:
                started = await start_nominated(
                    session, timeout_s=self.settings.scheduling.preemption.start_timeout_s
                )
        except Exception:  # a defect in one nomination must not stop the rounds behind it
            log.exception("starting the nominated preemptors failed")
            started = []
        for name in started:
            log.info("%s placed: the jobs it preempted are gone", name)
        for outcome in outcomes:
            self.metrics.gang.labels(outcome.action).inc()
            log.warning("%s %s: %s", outcome.job, outcome.action.lower(), outcome.message)
        return outcomes

    async def step(self) -> None:
        """What the background task runs: supervision and a round, then (unless a backlog is
        being worked off: jobs placed, and a full window or jobs deferred) wait for a wake-up
        or the period.
        Rounds start at least `min_interval_s` apart, so a burst of submissions is taken in
        batches (an isolated submission is scheduled at once), and at least the last step's
        duration over `busy_share` apart, so rounds on a large inventory cannot take an API
        replica's whole process."""
        spacing = max(self.settings.scheduling.min_interval_s, self._last_busy / self.busy_share)
        pause = self._last_start + spacing - time.monotonic()
        if pause > 0:
            await asyncio.sleep(pause)
        self._last_start = time.monotonic()
        await self.supervise()
        report = await self.run_once()
        self._last_busy = time.monotonic() - self._last_start
        if report is not None and report.backlog:
            return  # the next round as soon as spacing allows, not after the period
        try:
            await asyncio.wait_for(self.wake.wait(), timeout=self.settings.scheduling.interval_s)
        except TimeoutError:
            pass
        self.wake.clear()

    async def stop(self) -> None:
        self._watching.close()
        await self.leadership.release()
        self.metrics.leader.set(0)
