"""Every background loop of a server process, each named for the state it drives, with its
period. Started from the app lifespan (and from `vglobal scheduler`), guarded so that a failing
step is logged and retried after a backoff, and stopped in order: the loops first, then what
they held."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from volcano_global.backoff import Backoff
from volcano_global.db.engine import create_engine, is_unavailable
from volcano_global.db.notifications import Listener
from volcano_global.metrics import Metrics
from volcano_global.scheduler.loop import Scheduler
from volcano_global.services.inventory.heartbeats import HeartbeatMonitor
from volcano_global.services.kube.feed import ChangeFeed
from volcano_global.services.lifecycle.outbox import OUTBOX
from volcano_global.services.wakeups import ROUNDS
from volcano_global.settings import Settings
from volcano_global.shutdown import Deadline, bounded, cancelling, settle

log = logging.getLogger(__name__)

# After a failure a loop pauses its period (at least 1 s), twice that after another, up to
# this: a database that is back is noticed within seconds, one that stays away is not asked
# (and logged about) every second.
FAILURE_PAUSE_CAP_S = 5.0
LAG_PROBE_S = 0.25  # the event loop's lag probed this often (`event_loop_lag`)


@dataclass(frozen=True)
class Loop:
    """`step` run every `every_s` seconds (0: again at once; the step may wait itself)."""

    name: str  # the state the loop drives, as logged
    step: Callable[[], Awaitable[None]]
    every_s: float
    close: Callable[[], Awaitable[None]] | None = None  # once the loop has stopped


def server_loops(
    *,
    settings: Settings,
    engine: AsyncEngine,
    sessions: async_sessionmaker[AsyncSession],
    scheduler: Scheduler,
    kube_feed: ChangeFeed,
    metrics: Metrics,
) -> list[Loop]:
    """An API replica's loops. Made once the agent port is open: silence is counted from
    then."""
    monitor = HeartbeatMonitor(sessions, timeout_s=settings.agents.heartbeat_timeout_s)

    async def mark_silent_clusters() -> None:
        for name in await monitor.check():
            log.warning("cluster %s is NotReady: its agent went silent", name)

    loops = [
        Loop(
            "clusters-silent-to-notready",
            mark_silent_clusters,
            every_s=max(settings.agents.heartbeat_timeout_s / 5, 0.2),
        ),
        kube_change_feed(kube_feed),
        event_loop_lag(metrics),
    ]
    if engine.dialect.name == "postgresql":  # on a connection of its own, not the pool's
        # Commits of other processes wake this one's agent streams (they poll meanwhile).
        listener = Listener(create_engine(settings.database_url, pool_size=1), OUTBOX)
        loops.append(
            Loop(
                "outbox-notifications",
                listener.listen,
                every_s=1.0,
                close=listener.engine.dispose,
            )
        )
    if settings.scheduling.enabled:
        loops += scheduling_loops(settings, engine, scheduler)
    return loops


def event_loop_lag(metrics: Metrics, probe_s: float = LAG_PROBE_S) -> Loop:
    """How late a timer fires, every `probe_s`, into `vglobal_event_loop_lag_seconds`: a
    callback that holds the loop (a round's long stretch, a large snapshot) shows as lag that
    every request of the process also waited."""

    async def probe() -> None:
        asked = time.perf_counter()
        await asyncio.sleep(probe_s)
        metrics.loop_lag.observe(max(0.0, time.perf_counter() - asked - probe_s))

    return Loop("event-loop-lag", probe, every_s=0)


def kube_change_feed(feed: ChangeFeed) -> Loop:
    """The changes behind every watch of the Kubernetes-compatible API, read every `poll_s`
    while a watch is open (the step waits for one)."""
    return Loop("kube-change-feed", feed.step, every_s=feed.poll_s)


def scheduling_rounds(scheduler: Scheduler) -> Loop:
    """Gang supervision and a placement round, back to back (the step waits for a wake-up or
    the scheduling period itself)."""
    return Loop("scheduling-rounds", scheduler.step, every_s=0)


def scheduling_loops(settings: Settings, engine: AsyncEngine, scheduler: Scheduler) -> list[Loop]:
    """The rounds and, on Postgres, what wakes them from other processes: a cancel, a queue
    change or an agent's report of freed GPUs committed by another replica
    (`services/wakeups.py`)."""
    loops = [scheduling_rounds(scheduler)]
    if engine.dialect.name == "postgresql":
        listener = Listener(create_engine(settings.database_url, pool_size=1), ROUNDS)
        loops.append(
            Loop(
                "rounds-notifications",
                listener.listen,
                every_s=1.0,
                close=listener.engine.dispose,
            )
        )
    return loops


class Background:
    """Loops running as named tasks, started together."""

    def __init__(self, loops: Sequence[Loop]) -> None:
        self.loops = tuple(loops)
        self.tasks = [asyncio.create_task(run_guarded(loop), name=loop.name) for loop in loops]

    async def stop(self, deadline: Deadline | None = None) -> None:
        """Cancel every loop and wait for them, then close what they held, in order; by the
        deadline (a loop or close still running then is left behind, logged by name)."""
        deadline = deadline or Deadline(10.0)
        for task in self.tasks:
            task.cancel()
        ended = await settle(self.tasks, within_s=deadline.left())
        for task in self.tasks:
            if task not in ended:
                log.warning("background task %s did not stop in time", task.get_name())
        for loop in self.loops:
            if loop.close is not None:
                await bounded(loop.close(), name=f"closing {loop.name}", deadline=deadline)


async def run_guarded(
    loop: Loop,
    *,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    iterations: int | None = None,
) -> None:
    """Run the loop's step until cancelled (or `iterations` steps, for tests); a failing step
    is logged and tried again after a pause that grows while it keeps failing."""
    backoff = Backoff(initial=max(loop.every_s, 1.0), cap=max(loop.every_s, FAILURE_PAUSE_CAP_S))
    done = 0
    while iterations is None or done < iterations:
        done += 1
        try:
            await loop.step()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if cancelling():  # the step's cleanup failed while it was being cancelled
                raise asyncio.CancelledError from exc
            pause = backoff.next_delay()
            if is_unavailable(exc):  # expected while the database restarts: no traceback
                log.warning(
                    "background task %s: database unavailable (%s); retrying in %.1f s",
                    loop.name,
                    str(exc).splitlines()[0],
                    pause,
                )
            else:
                log.exception("background task %s failed; retrying in %.1f s", loop.name, pause)
            await sleep(pause)
            continue
        if cancelling():  # the step swallowed a cancellation: the loop stops all the same
            raise asyncio.CancelledError
        backoff.reset()
        await sleep(loop.every_s)
