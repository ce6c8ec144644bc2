"""Stopping within a budget: each stop step runs against a deadline shared by the whole
shutdown, and a step that overruns it is cancelled and left behind (logged by name) instead of
holding the process. A process that must exit before Kubernetes kills it (the pod's grace
period) cannot wait on a step that might never end: a database connection stuck in a cancelled
query, a stream that does not close."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Iterable

log = logging.getLogger(__name__)

# After a step is cancelled at its deadline, how long its cleanup may take before it is
# abandoned: a step that swallows its cancellation must not hold the process either.
CANCEL_GRACE_S = 1.0


class Deadline:
    """The time by which every stop step must be done (monotonic clock)."""

    def __init__(self, budget_s: float) -> None:
        self.at = time.monotonic() + budget_s

    def left(self) -> float:
        return max(0.0, self.at - time.monotonic())


async def bounded(step: Awaitable[object], *, name: str, deadline: Deadline) -> bool:
    """Run a stop step until the deadline; whether it finished (a failing step is logged and
    counts as finished: the next steps still run)."""
    task = asyncio.ensure_future(step)
    done = await settle([task], within_s=deadline.left())
    if task in done:
        if not task.cancelled() and task.exception() is not None:
            log.warning("shutdown: %s failed: %r", name, task.exception())
        return True
    log.warning("shutdown: %s did not finish in time; cancelled and left behind", name)
    return False


async def settle(tasks: Iterable[asyncio.Future[object]], *, within_s: float) -> set[object]:
    """Wait up to `within_s` for the tasks; cancel those still running (again and again: a
    cancellation may be swallowed) for at most CANCEL_GRACE_S more. The tasks that ended."""
    pending = {t for t in tasks if not t.done()}
    if pending:
        _, pending = await asyncio.wait(pending, timeout=within_s)
    give_up = time.monotonic() + CANCEL_GRACE_S
    while pending and time.monotonic() < give_up:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=0.1)
    return {t for t in tasks if t.done()}


def cancelling() -> bool:
    """Whether the running task is being cancelled: an error raised by cleanup code while it
    was (a rollback on a connection cut by the cancellation) must not end the cancellation."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
