"""The open watches of a server process: how many each token holds (bounded per token and in
total, 429 past either), and whether each token still stands. One statement every
`recheck_s` checks every watching token at once (revoked, expired, gone); the watches of a
token that no longer stands are ended within that period, as a new request with it would be
refused (401)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from sqlalchemy import or_, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from volcano_global.db.base import utcnow
from volcano_global.db.engine import reading
from volcano_global.db.models import ApiToken
from volcano_global.errors import TooManyRequests
from volcano_global.services.kube.feed import Subscription

log = logging.getLogger(__name__)


@dataclass(eq=False)
class Ticket:
    """One admitted watch: its token's key (the token's hash), and its subscription once
    subscribed. `checked`: the token is a stored one (the configured admin token is not, and
    stands until the server restarts)."""

    key: str
    checked: bool
    subscription: Subscription | None = None


@dataclass
class WatchLimits:
    per_token: int
    total: int
    recheck_s: float


@dataclass(eq=False)
class OpenWatches:
    sessions: async_sessionmaker[AsyncSession]
    limits: WatchLimits
    _open: dict[str, set[Ticket]] = field(default_factory=dict)
    _task: asyncio.Task[None] | None = None
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def total(self) -> int:
        return sum(len(tickets) for tickets in self._open.values())

    def of(self, key: str) -> int:
        return len(self._open.get(key, ()))

    async def until(self, total: int) -> None:
        """Wait until `total` watches are open (what a caller or a test awaits)."""
        while self.total < total:
            self._changed.clear()
            await self._changed.wait()

    def admit(self, key: str, *, checked: bool) -> Ticket:
        """A ticket for one more watch of the token, or 429 naming the limit."""
        if self.of(key) >= self.limits.per_token:
            raise TooManyRequests(
                f"this token already holds {self.limits.per_token} open watches "
                "(setting kube.watches_per_token); close one or retry later"
            )
        if self.total >= self.limits.total:
            raise TooManyRequests(
                f"the server holds {self.limits.total} open watches "
                "(setting kube.watches_total); retry later"
            )
        ticket = Ticket(key, checked)
        self._open.setdefault(key, set()).add(ticket)
        self._changed.set()
        if checked and (self._task is None or self._task.done()):
            self._task = asyncio.create_task(self._recheck(), name="kube-watch-tokens")
        return ticket

    def release(self, ticket: Ticket) -> None:
        tickets = self._open.get(ticket.key)
        if tickets is not None:
            tickets.discard(ticket)
            if not tickets:
                del self._open[ticket.key]
        self._changed.set()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            # gather, not suppress: a stop that is itself cancelled must still raise
            await asyncio.gather(self._task, return_exceptions=True)

    async def _recheck(self) -> None:
        """While a stored token watches: every period, one read of which still stand."""
        while any(t.checked for tickets in self._open.values() for t in tickets):
            await asyncio.sleep(self.limits.recheck_s)
            keys = [k for k, tickets in self._open.items() if any(t.checked for t in tickets)]
            try:
                async with reading(self.sessions) as session:
                    standing = await standing_tokens(session, keys)
            except Exception:  # the database may be away a moment: check again next period
                log.warning("could not re-check the tokens of open watches", exc_info=True)
                continue
            for key in set(keys) - standing:
                for ticket in list(self._open.get(key, ())):
                    if ticket.checked and ticket.subscription is not None:
                        ticket.subscription.end("token revoked or expired")


async def standing_tokens(session: AsyncSession, keys: list[str]) -> set[str]:
    """Which of the token hashes are of tokens neither revoked nor expired."""
    if not keys:
        return set()
    statement = select(ApiToken.token_hash).where(
        ApiToken.token_hash.in_(keys),
        ApiToken.revoked_at.is_(None),
        or_(ApiToken.expires_at.is_(None), ApiToken.expires_at > utcnow()),
    )
    return set((await session.execute(statement)).scalars())
