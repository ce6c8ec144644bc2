"""Per-queue limits on what waits: pending jobs and their stored document bytes (issue 38).

A submission that would take its queue over a limit is refused (Forbidden, as Kubernetes'
ResourceQuota answers "exceeded quota": 403), naming the limit, the queue and the count. The
limits come from the settings (`limits.max_pending_jobs`, `limits.max_pending_bytes`) and a
queue may set its own with the annotations `PENDING_JOBS_ANNOTATION` and
`PENDING_BYTES_ANNOTATION` (queues are admin-only documents); "0" or a value that is not a
whole number leaves the setting in force, "none" lifts the limit for that queue.

Counting without a query per submission: a queue's pending count is read (the (queue, state)
prefix of `ix_jobs_queue_waiting`) at most every `refresh_s`, and afresh whenever the count
seen is within 10% of a limit (so a refusal is decided on a fresh count: one begun for it,
or the one under way when it came; submissions near a limit share one count at a time per
queue, 10-30 ms at 20,000 pending jobs on this project's 2-core test machine). Between
reads this process adds what it admitted since the read began (`_Ledger`): submissions in the
job writer's batch, not yet committed, count, so concurrent submissions to one process never
take a queue over its limit. A read first waits (at most `SETTLE_S`) for this process's
writes to the queue under way when it began to end: a write committed while the count ran,
but not yet seen as done here, would otherwise be counted twice and refuse a submission under
the limit. A submission's write is done when the writer has answered it, even if its caller
went away meanwhile (`finished`): the job may still be written, so it is counted until then.
Several replicas each count their own: together they can overshoot by what the others have
in flight (admitted, not yet committed: at most one group-commit batch each) when the queue
is near its limit. Requeued jobs count but are never
refused."""

from __future__ import annotations

import asyncio
import contextlib
import time
import weakref
from collections import defaultdict
from collections.abc import Awaitable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import LargeBinary, cast, func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from volcano_global.db.models import Job, JobState, Queue
from volcano_global.errors import Forbidden

if TYPE_CHECKING:
    from volcano_global.services.jobs.writer import JobWriter

T = TypeVar("T")
PENDING_JOBS_ANNOTATION = "global.volcano.sh/max-pending-jobs"
PENDING_BYTES_ANNOTATION = "global.volcano.sh/max-pending-bytes"
NEAR = 0.9  # within this share of a limit, every submission reads the count afresh
SETTLE_S = 2.0  # a fresh count waits at most this long for the queue's writes under way


@dataclass(frozen=True)
class Limits:
    jobs: int | None  # None: no limit
    bytes: int | None


@dataclass
class _Usage:
    """A queue's pending jobs and bytes as read, its limits, and this process's completions
    (submissions written or refused by the writer) when the read began."""

    jobs: int
    bytes: int
    limits: Limits
    done: tuple[int, int]
    began: float


@dataclass
class _Ledger:
    admitted: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))
    done: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))
    # Fresh counts waiting for the writes admitted before they began: (that many done, woken).
    waiters: dict[str, list[tuple[int, asyncio.Future[None]]]] = field(
        default_factory=lambda: defaultdict(list)
    )

    def begin(self, queue: str, size: int) -> None:
        admitted = self.admitted[queue]
        admitted[0] += 1
        admitted[1] += size

    def end(self, queue: str, size: int) -> None:
        done = self.done[queue]
        done[0] += 1
        done[1] += size
        waiting = self.waiters.get(queue)
        if waiting:
            for target, woken in waiting:
                if target <= done[0] and not woken.done():
                    woken.set_result(None)
            self.waiters[queue] = [w for w in waiting if not w[1].done()]

    async def settle(self, queue: str) -> None:
        """Wait until as many writes to `queue` have ended as were admitted now (or
        `SETTLE_S`): later admissions do not make it wait longer."""
        target = self.admitted[queue][0]
        if self.done[queue][0] >= target:
            return
        woken = asyncio.get_running_loop().create_future()
        self.waiters[queue].append((target, woken))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(woken, SETTLE_S)


class PendingLimits:
    def __init__(
        self, sessions: async_sessionmaker[AsyncSession], defaults: Limits, refresh_s: float
    ) -> None:
        self.sessions = sessions
        self.defaults = defaults
        self.refresh_s = refresh_s
        self._usage: dict[str, _Usage] = {}
        self._ledger = _Ledger()
        self._reading: dict[str, asyncio.Task[_Usage | None]] = {}

    def admit(self, queue: str, size: int) -> AbstractAsyncContextManager[None]:
        """Admit one submission of `size` bytes to `queue` (Forbidden over a limit) for the
        time of its write."""
        return _Admission(self, queue, size)

    async def _begin(self, queue: str, size: int) -> bool:
        """Admit the submission (Forbidden over a limit); False if there is no such queue
        (the writer refuses it)."""
        usage = self._usage.get(queue)
        if usage is None or self._stale(usage) or self._near(queue, usage, 1, size):
            usage = await self._fresh(queue)
        if usage is None:
            return False
        self._refuse_over(queue, usage, size)
        self._ledger.begin(queue, size)
        return True

    def _stale(self, usage: _Usage) -> bool:
        return time.monotonic() - usage.began > self.refresh_s

    def _projected(self, queue: str, usage: _Usage) -> tuple[int, int]:
        admitted = self._ledger.admitted[queue]
        return (
            usage.jobs + admitted[0] - usage.done[0],
            usage.bytes + admitted[1] - usage.done[1],
        )

    def _near(self, queue: str, usage: _Usage, jobs: int, size: int) -> bool:
        count, stored = self._projected(queue, usage)
        limits = usage.limits
        return (limits.jobs is not None and count + jobs > NEAR * limits.jobs) or (
            limits.bytes is not None and stored + size > NEAR * limits.bytes
        )

    def _refuse_over(self, queue: str, usage: _Usage, size: int) -> None:
        count, stored = self._projected(queue, usage)
        limits = usage.limits
        if limits.jobs is not None and count + 1 > limits.jobs:
            raise Forbidden(
                f"exceeded quota: queue {queue!r} has {count} pending jobs, its limit "
                f"max-pending-jobs is {limits.jobs} ({_where(PENDING_JOBS_ANNOTATION)}); "
                "wait for some to start or cancel some"
            )
        if limits.bytes is not None and stored + size > limits.bytes:
            raise Forbidden(
                f"exceeded quota: queue {queue!r} has {count} pending jobs of {stored} bytes, "
                f"this document adds {size}, its limit max-pending-bytes is {limits.bytes} "
                f"({_where(PENDING_BYTES_ANNOTATION)})"
            )

    async def _fresh(self, queue: str) -> _Usage | None:
        """A read of the queue's usage begun now, or the one under way: concurrent submissions
        near a limit share one count instead of each scanning the queue's pending jobs (a read
        under way counts every submission it does not see: `_Usage.done`)."""
        reading = self._reading.get(queue)
        if reading is None:
            reading = self._reading[queue] = asyncio.ensure_future(self._read(queue))
            reading.add_done_callback(lambda _: self._reading.pop(queue, None))
        return await asyncio.shield(reading)

    async def _read(self, queue: str) -> _Usage | None:
        """The queue's pending count and bytes now (None: no such queue; the writer says so)."""
        await self._ledger.settle(queue)
        done = tuple(self._ledger.done[queue])
        began = time.monotonic()
        async with self.sessions() as session:
            found = (
                await session.execute(
                    select(Queue.id, Queue.annotations).where(Queue.name == queue)
                )
            ).first()
            if found is None:
                return None
            jobs, stored = (
                await session.execute(
                    select(func.count(), func.coalesce(func.sum(_octets(session)), 0)).where(
                        Job.queue_id == found.id, Job.state == JobState.PENDING
                    )
                )
            ).one()
        usage = _Usage(int(jobs), int(stored), self._limits(found.annotations), done, began)
        current = self._usage.get(queue)
        if current is None or current.began <= began:
            self._usage[queue] = usage
        return usage

    def _limits(self, annotations: dict[str, Any] | None) -> Limits:
        annotations = annotations or {}
        return Limits(
            _limit(annotations.get(PENDING_JOBS_ANNOTATION), self.defaults.jobs),
            _limit(annotations.get(PENDING_BYTES_ANNOTATION), self.defaults.bytes),
        )


def _octets(session: AsyncSession) -> Any:
    """The stored document's size in bytes (not characters)."""
    if session.get_bind().dialect.name == "postgresql":
        return func.octet_length(Job.source)
    return func.length(cast(Job.source, LargeBinary))


def _limit(value: object, default: int | None) -> int | None:
    if isinstance(value, str) and value.strip().lower() == "none":
        return None
    try:
        limit = int(str(value))
    except ValueError:
        return default
    return limit if limit > 0 else default


def _where(annotation: str) -> str:
    return f"the queue's annotation {annotation} or the server's default"


class _Admission:
    """`PendingLimits.admit`'s context. A class, not an `asynccontextmanager`: an async
    generator per submission costs its registration with the event loop and more calls."""

    def __init__(self, limits: PendingLimits, queue: str, size: int) -> None:
        self.limits, self.queue, self.size = limits, queue, size
        self.begun = False

    async def __aenter__(self) -> None:
        self.begun = await self.limits._begin(self.queue, self.size)

    async def __aexit__(self, *exc_info: object) -> None:
        if self.begun:
            self.limits._ledger.end(self.queue, self.size)


# The guard of each job writer (`install`, at the server's start); a writer without one (tests
# that build a writer alone) admits everything.
_GUARDS: weakref.WeakKeyDictionary[JobWriter, PendingLimits] = weakref.WeakKeyDictionary()


def install(writer: JobWriter, guard: PendingLimits) -> None:
    _GUARDS[writer] = guard


async def finished(write: Awaitable[T]) -> T:
    """The write's result; if the caller is cancelled meanwhile, the write goes on (the job may
    still be stored) and the cancellation is raised once it has ended, so that the queue's
    count sees the job until then."""
    task = asyncio.ensure_future(write)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        await asyncio.wait([task])
        raise


def pending_room(writer: JobWriter, queue: str, size: int) -> AbstractAsyncContextManager[None]:
    """Admit a submission to `queue` under its pending limits for the time of its write."""
    guard = _GUARDS.get(writer)
    return contextlib.nullcontext() if guard is None else guard.admit(queue, size)
