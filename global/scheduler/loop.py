"""Scheduling rounds: on the leader, take a consistent snapshot, solve off the event loop with
the round's time limit, commit atomically; a round whose inventory moved is retried."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from volcano_global.db.engine import transaction
from volcano_global.scheduler.leader import Leadership
from volcano_global.services.gang import Outcome, supervise
from volcano_global.services.scheduling import RoundResult, StaleRound, build_snapshot, commit_round
from volcano_global.settings import Settings
from volcano_global.solver import Policy, SolveOptions, solve

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RoundReport:
    result: RoundResult
    status: str
    gap: float
    seconds: float


class Scheduler:
    def __init__(
        self, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], settings: Settings
    ) -> None:
        self.sessions = sessions
        self.settings = settings
        self.leadership = Leadership(engine)
        self.wake = asyncio.Event()  # set by submissions and inventory changes to run sooner

    async def run_once(self, *, retries: int = 3) -> RoundReport | None:
        """One round; None when another replica leads."""
        if not await self.leadership.acquire():
            return None
        options = SolveOptions(
            time_limit_s=self.settings.scheduling.round_time_limit_s,
            window=self.settings.scheduling.window,
        )
        for attempt in range(retries):
            async with transaction(self.sessions) as session:
                snapshot, context = await build_snapshot(session, window=options.window)
            if not snapshot.jobs and not context.unmodelled:
                return None
            decision = await asyncio.to_thread(
                solve, snapshot, Policy(self.settings.scheduling.policy), options
            )
            try:
                async with transaction(self.sessions) as session:
                    result = await commit_round(session, decision=decision, context=context)
            except StaleRound as exc:
                log.info("round discarded (%s); retrying (%d)", exc, attempt + 1)
                continue
            if result.placed:
                log.info(
                    "round %d placed %d jobs (%s, gap %.2f%%, %.2f s)",
                    result.generation,
                    len(result.placed),
                    decision.status,
                    decision.gap * 100,
                    decision.solve_seconds,
                )
            return RoundReport(result, decision.status, decision.gap, decision.solve_seconds)
        return None

    async def supervise(self) -> list[Outcome]:
        """Withdraw or requeue gangs that did not start or lost a cluster (leader only)."""
        if not await self.leadership.acquire():
            return []
        async with transaction(self.sessions) as session:
            outcomes = await supervise(
                session, default_timeout_s=self.settings.scheduling.gang_start_timeout_s
            )
        for outcome in outcomes:
            log.warning("%s %s: %s", outcome.job, outcome.action.lower(), outcome.message)
        return outcomes

    async def step(self) -> None:
        """What the background task runs: supervision and a round, then wait for a wake-up or
        the period."""
        await self.supervise()
        await self.run_once()
        try:
            await asyncio.wait_for(self.wake.wait(), timeout=self.settings.scheduling.interval_s)
        except TimeoutError:
            pass
        self.wake.clear()

    async def stop(self) -> None:
        await self.leadership.release()
