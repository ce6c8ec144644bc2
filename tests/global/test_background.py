"""The server's background loops: which run, named for the state they drive, at which period;
a failing step is retried after a pause that doubles while it keeps failing (capped) and is
back to the first after a success; stopping cancels every loop, then closes what they held.
Pauses are recorded, not slept."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from tests.factories import REPLY_S
from volcano_global.background import (
    Background,
    Loop,
    event_loop_lag,
    run_guarded,
    server_loops,
)
from volcano_global.db.engine import create_engine, create_session_factory
from volcano_global.metrics import Metrics
from volcano_global.scheduler.loop import Scheduler
from volcano_global.services.kube.feed import ChangeFeed
from volcano_global.settings import Settings
from volcano_global.shutdown import CANCEL_GRACE_S, Deadline


@pytest.mark.parametrize(
    ("url", "scheduling", "names"),
    [
        (
            "postgresql+asyncpg://postgres@127.0.0.1:5432/unused",
            True,
            [
                "clusters-silent-to-notready",
                "kube-change-feed",
                "event-loop-lag",
                "outbox-notifications",
                "scheduling-rounds",
                "rounds-notifications",
            ],
        ),
        (
            "sqlite+aiosqlite:///unused.db",
            True,
            [
                "clusters-silent-to-notready",
                "kube-change-feed",
                "event-loop-lag",
                "scheduling-rounds",
            ],
        ),
        (
            "sqlite+aiosqlite:///unused.db",
            False,
            ["clusters-silent-to-notready", "kube-change-feed", "event-loop-lag"],
        ),
    ],
)
async def test_an_api_replica_runs_its_loops_at_their_periods(
    url: str, scheduling: bool, names: list[str]
) -> None:
    """Notifications need Postgres; rounds run unless a scheduler process of its own does."""
    settings = Settings(
        database_url=url, scheduling={"enabled": scheduling}, agents={"heartbeat_timeout_s": 30}
    )
    engine = create_engine(url)  # nothing connects
    sessions = create_session_factory(engine)
    scheduler = Scheduler(engine, sessions, settings)
    feed = ChangeFeed(sessions, poll_s=0.5, settle_s=1.0)
    loops = server_loops(
        settings=settings,
        engine=engine,
        sessions=sessions,
        scheduler=scheduler,
        kube_feed=feed,
        metrics=Metrics(),
    )
    try:
        assert [loop.name for loop in loops] == names
        periods = {
            "clusters-silent-to-notready": 6.0,
            "kube-change-feed": 0.5,
            "outbox-notifications": 1.0,
            "rounds-notifications": 1.0,
        }
        assert [loop.every_s for loop in loops] == [periods.get(n, 0) for n in names]
    finally:
        for loop in loops:
            if loop.close is not None:
                await loop.close()
        await scheduler.stop()
        await engine.dispose()


class Flaky:
    """A step that fails when told to, and the pauses the loop took after each step."""

    def __init__(self, outcomes: str) -> None:
        self.outcomes = iter(outcomes)  # "x": fails, ".": succeeds
        self.pauses: list[float] = []

    async def step(self) -> None:
        if next(self.outcomes) == "x":
            raise RuntimeError("boom")

    async def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)


async def run(outcomes: str, every_s: float) -> list[float]:
    flaky = Flaky(outcomes)
    loop = Loop("test", flaky.step, every_s=every_s)
    await run_guarded(loop, sleep=flaky.sleep, iterations=len(outcomes))
    return flaky.pauses


async def test_a_failing_step_backs_off_and_a_success_starts_over() -> None:
    assert await run("xxxxx.x.", every_s=0) == [1.0, 2.0, 4.0, 5.0, 5.0, 0, 1.0, 0]


async def test_the_first_pause_after_a_failure_is_the_period_when_longer() -> None:
    assert await run("..xx.", every_s=6.0) == [6.0, 6.0, 6.0, 6.0, 6.0]
    assert await run("x.", every_s=0.2) == [1.0, 0.2]


async def test_stopping_cancels_every_loop_then_closes_in_order() -> None:
    closed: list[str] = []
    started = asyncio.Event()

    async def forever() -> None:
        started.set()
        await asyncio.Event().wait()

    def closer(name: str) -> Loop:
        async def close() -> None:
            closed.append(name)

        return Loop(name, forever, every_s=1.0, close=close)

    background = Background([closer("first"), Loop("plain", forever, every_s=0), closer("last")])
    assert [t.get_name() for t in background.tasks] == ["first", "plain", "last"]
    await asyncio.wait_for(started.wait(), timeout=REPLY_S)
    await background.stop()
    assert all(t.cancelled() for t in background.tasks)
    assert closed == ["first", "last"]


async def test_a_loop_whose_cleanup_fails_while_cancelled_still_stops() -> None:
    # A step cancelled mid-query whose rollback then fails (the connection was cut by the
    # cancellation): the error must not be taken for a failed step to retry, or the loop runs
    # on and the process never stops.
    started = asyncio.Event()

    async def query_then_failing_rollback() -> None:
        try:
            started.set()
            await asyncio.Event().wait()
        finally:
            raise ConnectionError("rollback: another operation is in progress")

    background = Background([Loop("rounds", query_then_failing_rollback, every_s=0)])
    await asyncio.wait_for(started.wait(), timeout=REPLY_S)
    await asyncio.wait_for(background.stop(Deadline(5.0)), timeout=REPLY_S)
    assert background.tasks[0].cancelled()


async def test_a_step_that_never_stops_is_left_behind_at_the_deadline() -> None:
    # A loop that swallows every cancellation and a close that never returns: stop() returns
    # by the deadline (and a short grace), naming them in the log instead of waiting for ever.
    released = False

    async def stubborn() -> None:
        while not released:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                continue

    async def close() -> None:
        await asyncio.Event().wait()

    background = Background([Loop("stubborn", stubborn, every_s=0, close=close)])
    await asyncio.sleep(0)
    began = time.monotonic()
    await background.stop(Deadline(0.5))
    assert time.monotonic() - began < 0.5 + 2 * CANCEL_GRACE_S + 1.0
    assert not background.tasks[0].done()
    released = True
    background.tasks[0].cancel()
    await asyncio.wait(background.tasks, timeout=5)
    assert background.tasks[0].cancelled()


async def test_the_lag_probe_counts_how_long_the_loop_was_held() -> None:
    """A callback that holds the event loop for 0.2 s while a 0.05 s probe sleeps: the probe
    observes ~0.15 s of lag; an idle loop's probe observes next to none."""
    metrics = Metrics()
    probe = event_loop_lag(metrics, probe_s=0.05).step
    await probe()
    idle = metrics.loop_lag.collect()[0]
    assert _sum(idle) < 0.04
    task = asyncio.create_task(probe())
    await asyncio.sleep(0)  # the probe's timer is set
    time.sleep(0.2)  # noqa: ASYNC251 - holding the loop is the point
    await task
    assert _sum(metrics.loop_lag.collect()[0]) - _sum(idle) >= 0.14


def _sum(family: Any) -> float:
    return next(s.value for s in family.samples if s.name.endswith("_sum"))
