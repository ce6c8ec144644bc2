"""Capped exponential backoff with jitter, for the loops that reconnect or retry forever: the
agent's stream, its Kubernetes watches and the server's background tasks. Pure (the agent
imports it): no I/O, no sleeping; the caller sleeps for what `next_delay` returns."""

from __future__ import annotations

import random


class Backoff:
    """Delays of `initial`, then `factor` times the last, never more than `cap`, each
    multiplied by a random factor in [1 - jitter, 1 + jitter] (so that clients cut off together
    do not come back together); `reset` after a success starts from `initial` again.

    `cap` may be changed between delays (the agent's follows the heartbeat interval the Global
    asks for): the next delay obeys it."""

    def __init__(
        self,
        *,
        initial: float,
        cap: float,
        factor: float = 2.0,
        jitter: float = 0.0,
        rng: random.Random | None = None,
    ) -> None:
        if initial < 0 or cap < 0 or factor < 1 or not 0 <= jitter <= 1:
            raise ValueError("need initial >= 0, cap >= 0, factor >= 1 and 0 <= jitter <= 1")
        self.initial = initial
        self.cap = cap
        self.factor = factor
        self.jitter = jitter
        self._uniform = (rng or random).uniform  # a seeded Random in tests
        self._next = initial

    def next_delay(self) -> float:
        """How long to wait before the next attempt (and the one after grows)."""
        delay = min(self._next, self.cap)
        self._next = delay * self.factor
        if self.jitter:
            delay *= self._uniform(1 - self.jitter, 1 + self.jitter)
        return delay

    def reset(self) -> None:
        """An attempt succeeded: the next failure waits `initial` again."""
        self._next = self.initial
