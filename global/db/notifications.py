"""Wake-ups that follow commits: a transaction says which keys (e.g. cluster ids) it wrote
for on a channel, and whoever watches a key is woken once the transaction commits (never on a
rollback).

A commit in this process wakes its watchers through a session event. On Postgres a commit in
any process does too: the writing transaction sends `NOTIFY <channel>, '<key>'` (delivered on
commit only, like the rows) and each process LISTENs on one connection of its own
(`Listener`). While that connection is down notifications may be lost, so watchers should
poll meanwhile (`Channel.listening` says whether they may rely on it), and every watcher is
woken when it comes back."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession
from sqlalchemy.orm import Session

log = logging.getLogger(__name__)

_channels: dict[str, Channel] = {}


class Channel:
    """One kind of wake-up, keyed by UUID, named as its Postgres NOTIFY channel."""

    def __init__(self, name: str) -> None:
        if name in _channels:
            raise ValueError(f"notification channel {name!r} exists")
        self.name = name
        self.listening = False  # this process's LISTEN connection for the channel is up
        self._watches: dict[uuid.UUID, set[asyncio.Event]] = defaultdict(set)
        self._notify = text(
            f"SELECT pg_notify('{name}', k) FROM unnest(CAST(:keys AS text[])) AS k"
        )
        _channels[name] = self

    def wrote(self, session: AsyncSession, keys: Iterable[uuid.UUID]) -> None:
        """The session's transaction writes for these keys."""
        session.info.setdefault(self._info_key, set()).update(keys)

    @contextmanager
    def watch(self, key: uuid.UUID) -> Iterator[asyncio.Event]:
        """An event set whenever something for the key may have been committed (the watcher
        clears it before reading)."""
        woken = asyncio.Event()
        self._watches[key].add(woken)
        try:
            yield woken
        finally:
            self._watches[key].discard(woken)
            if not self._watches[key]:
                del self._watches[key]

    def wake(self, keys: Iterable[uuid.UUID] | None = None) -> None:
        """Wake the watchers of these keys (None: every watcher)."""
        for key in list(self._watches) if keys is None else keys:
            for woken in self._watches.get(key, ()):
                woken.set()

    @property
    def _info_key(self) -> str:
        return f"notify:{self.name}"

    def _notified(self, _connection: object, _pid: int, _channel: str, payload: str) -> None:
        try:
            self.wake([uuid.UUID(payload)])
        except ValueError:
            log.warning("%s notification with an unexpected payload %r", self.name, payload)


@event.listens_for(Session, "before_commit")
def _notify(session: Session) -> None:
    if not session.info or session.get_bind().dialect.name != "postgresql":
        return
    for channel in _channels.values():
        keys = session.info.get(channel._info_key)
        if keys:
            session.execute(channel._notify, {"keys": sorted(str(k) for k in keys)})


@event.listens_for(Session, "after_commit")
def _committed(session: Session) -> None:
    if not session.info:
        return
    for channel in _channels.values():
        keys = session.info.pop(channel._info_key, None)
        if keys:
            channel.wake(keys)


@event.listens_for(Session, "after_rollback")
def _rolled_back(session: Session) -> None:
    for channel in _channels.values():
        session.info.pop(channel._info_key, None)


class Listener:
    """This process's LISTEN connection for a channel (Postgres): a notification wakes its
    key's watchers. `listen` returns when the connection is lost (the caller starts it
    again)."""

    def __init__(self, engine: AsyncEngine, channel: Channel) -> None:
        self.engine = engine
        self.channel = channel

    async def listen(self) -> None:
        channel, lost = self.channel, asyncio.Event()
        async with self.engine.connect() as connection:
            driver: Any = (await connection.get_raw_connection()).driver_connection
            driver.add_termination_listener(lambda _: lost.set())
            await driver.add_listener(channel.name, channel._notified)
            channel.listening = True
            channel.wake()  # what was committed while nobody listened
            try:
                while not lost.is_set() and not driver.is_closed():
                    try:  # a lost connection is not always reported: check it now and then
                        await asyncio.wait_for(lost.wait(), timeout=5.0)
                    except TimeoutError:
                        await driver.execute("SELECT 1")
            finally:
                channel.listening = False
                if driver.is_closed():
                    await connection.invalidate()  # not back into the pool
                else:
                    await driver.remove_listener(channel.name, channel._notified)
        log.warning(
            "%s notifications: connection lost; watchers poll until it is back", channel.name
        )
