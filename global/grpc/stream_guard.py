"""The guard of an open agent stream: ends it when it loses its standing (its token revoked,
rotated or expired, its cluster deleted, a newer stream for its cluster:
`services/inventory/agent_streams.py`), within `agents.stream_check_s` or at once when woken
(by a change of its standing: `wakeups.stream_standing`, not by dispatch messages).
A newer stream in this process ends the older one without a read (the fast path); in another
process, its commit wakes the older stream, which reads its epoch."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Iterator
from contextvars import ContextVar

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from volcano_global.db.engine import reading
from volcano_global.db.models import Cluster
from volcano_global.errors import DomainError
from volcano_global.grpc.shared_reads import SharedRead
from volcano_global.services.inventory import agent_streams
from volcano_global.services.inventory.agent_streams import StreamClaim
from volcano_global.services.wakeups import OUTBOX, stream_standing

log = logging.getLogger(__name__)

# The guard of the stream a task serves: its inventory writes check it under the row lock.
_CURRENT: ContextVar[StreamGuard | None] = ContextVar("agent_stream_guard", default=None)
_NEWEST: dict[uuid.UUID, StreamGuard] = {}  # this process's newest stream per cluster


class StreamGuard:
    def __init__(
        self, sessions: async_sessionmaker[AsyncSession], claim: StreamClaim, check_s: float
    ) -> None:
        self.sessions = sessions
        self.claim = claim
        self.check_s = check_s
        self.ended: DomainError | None = None
        # The first `verify` reads: a change committed before `held` began watching is seen.
        self._checked = float("-inf")
        self._woken = asyncio.Event()

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """While the stream runs: the guard of its task, and this process's newest stream of
        its cluster (ending an older one here at once)."""
        cluster_id = self.claim.cluster_id
        older = _NEWEST.get(cluster_id)
        if older is None or older.claim.epoch < self.claim.epoch:
            if older is not None:
                # it wakes on this stream's commit (OUTBOX) and ends without a read
                older.ended = agent_streams.current_epoch(older.claim, self.claim.epoch)
            _NEWEST[cluster_id] = self
        token = _CURRENT.set(self)
        _OPEN.add(self)
        try:
            with OUTBOX.watch(stream_standing(cluster_id)) as woken:
                self._woken = woken
                yield
        finally:
            _OPEN.discard(self)
            if _NEWEST.get(cluster_id) is self:
                del _NEWEST[cluster_id]
            with contextlib.suppress(ValueError):  # closed from another context: it dies with it
                _CURRENT.reset(token)

    async def verify(self) -> None:
        """Raise why the stream must end, if it must: re-read when woken, else within
        `check_s` (a token's expiry, or a wake-up lost with the notification connection).
        The periodic check takes the process's read of all its streams (`_STANDINGS`) begun
        after this stream's previous check, or begins one; checked every half period, a
        change is then seen within one."""
        now = time.monotonic()
        if self.ended is None and self._woken.is_set():
            self._woken.clear()
            self._checked = now
            # Shielded: a stream cancelled mid-query must not leave a connection half-used.
            self.ended = await asyncio.shield(self._read())
        elif self.ended is None and now - self._checked >= self.check_s / 2:
            previous, self._checked = self._checked, now
            standing = _STANDINGS.of(
                self,
                since=previous,
                read_all=lambda: _read_all(self.sessions, list(_OPEN)),
                alone=self._read,
            )
            try:
                self.ended = await asyncio.shield(standing)
            except (SQLAlchemyError, OSError) as exc:
                # The read is every open stream's: a failed one (a connection reset, a pool
                # timeout) must not end them all at once and have every agent reconnect
                # together. It is due again at the stream's next message; a database truly
                # gone fails the stream's own writes.
                self._checked = previous
                log.warning("agent streams' standing not read (read again next): %s", exc)
        if self.ended is not None:
            log.info("agent stream of %s ended: %s", self.claim.cluster_name, self.ended.message)
            raise self.ended

    async def _read(self) -> DomainError | None:
        async with reading(self.sessions) as session:
            return await agent_streams.lost_standing(session, self.claim)


async def _read_all(
    sessions: async_sessionmaker[AsyncSession], guards: list[StreamGuard]
) -> dict[StreamGuard, DomainError | None]:
    async with reading(sessions) as session:
        verdicts = await agent_streams.lost_standings(session, [g.claim for g in guards])
    return dict(zip(guards, verdicts, strict=True))


def open_clusters() -> list[uuid.UUID]:
    """The clusters of this process's open streams."""
    return [guard.claim.cluster_id for guard in _OPEN]


_OPEN: set[StreamGuard] = set()  # this process's open streams
# Every open stream's standing in one transaction (100 streams each reading its own every 2 s
# were 50 transactions a second).
_STANDINGS: SharedRead[StreamGuard, DomainError | None] = SharedRead()


async def require_standing(session: AsyncSession, cluster: Cluster) -> None:
    """In an inventory write of an agent stream, after the cluster's row is locked: refuse it
    if the stream lost its standing (no-op outside a stream)."""
    guard = _CURRENT.get()
    if guard is not None:
        await agent_streams.require_standing(session, cluster=cluster, claim=guard.claim)


def current_claim() -> StreamClaim | None:
    """The claim of the stream the task serves (None outside a stream), for a write made on
    its behalf by another task (the group commit of deltas)."""
    guard = _CURRENT.get()
    return None if guard is None else guard.claim
