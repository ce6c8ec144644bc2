"""Keep trying a Kubernetes call through transient failures, as a share's creation and
cleanup must: a 429 from API Priority and Fairness, a 5xx from an unreachable admission webhook
or a restarting API server, or no answer at all never fails a share. The delays grow with the
project's shared backoff and are never shorter than the server's Retry-After; when it takes long
the user is told once, and the call goes on."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from core_agent.kubernetes.adapter import Transient
from volcano_global.backoff import Backoff

log = logging.getLogger(__name__)


class Abandoned(Exception):
    """The caller stopped wanting the result (a share cancelled while its creation waits)."""


T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    initial_s: float = 0.5
    cap_s: float = 30.0
    slow_after_s: float = 60.0  # then warn the user (once) that the cluster is not taking it


async def persistently(
    call: Callable[[], Awaitable[T]],
    *,
    what: str,
    policy: RetryPolicy,
    on_slow: Callable[[str], None],
    retry_on: tuple[type[Exception], ...] = (Transient,),
    stop: asyncio.Event | None = None,
) -> T:
    """`call()`'s result, trying again on `retry_on` for as long as it takes. `on_slow` gets
    one message for the user once `policy.slow_after_s` has passed. Raises Abandoned when
    `stop` is set while waiting (a call under way is never cut off: its effect must be known)."""
    backoff = Backoff(initial=policy.initial_s, cap=policy.cap_s, jitter=0.2)
    loop = asyncio.get_running_loop()
    started, warned = loop.time(), False
    while True:
        try:
            return await call()
        except retry_on as exc:
            retry_after = getattr(exc, "retry_after", None) or 0.0
            delay = max(backoff.next_delay(), retry_after)
            if not warned and loop.time() - started >= policy.slow_after_s:
                warned = True
                on_slow(f"{what}: still trying after {loop.time() - started:.0f} s ({exc})")
            log.warning("%s: %s; trying again in %.1f s", what, exc, delay)
            if stop is None:
                await asyncio.sleep(delay)
                continue
            try:
                await asyncio.wait_for(stop.wait(), timeout=delay)
            except TimeoutError:
                continue
            raise Abandoned(what) from exc
