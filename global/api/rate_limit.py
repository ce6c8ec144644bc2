"""A request rate limit per token (issue 38): a token bucket per bearer token over `/api/v1`
and `/k8s` - `rate` requests a second on average, `burst` at once - answered 429 with
Retry-After and a Kubernetes `Status` when empty (kubectl and client-go wait and retry).

The admin is not limited: the configured admin token at once, a token stored with the admin
role from its second request (the first is counted, then this server remembers what the API
authenticated it as). A request without a token is counted by its client address. Agents'
gRPC streams do not pass here. The buckets live in this process: with several replicas (or
`workers`), a token's rate is up to `rate` x replicas. A token that fails authentication gets
a bucket of its own like any other (each such request is answered 401 after one indexed
read)."""

from __future__ import annotations

import hashlib
import hmac
import math
import time
from collections import OrderedDict
from collections.abc import Callable

from starlette.types import ASGIApp, Receive, Scope, Send

from volcano_global.api.errors import status_response
from volcano_global.db.models import TokenRole

LIMITED = ("/api/v1", "/k8s")
MAX_BUCKETS = 10_000  # beyond, full buckets (idle tokens) are forgotten, then the oldest
MAX_ADMINS = 64  # stored admin tokens remembered as exempt


class TokenBuckets:
    def __init__(
        self, rate: float, burst: int, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rate, self.burst, self.clock = rate, burst, clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # tokens, at

    def take(self, key: str) -> float:
        """Take one request from `key`'s bucket: 0.0 if it had one, else the seconds until
        it will have one (nothing is taken)."""
        now = self.clock()
        tokens, at = self._buckets.pop(key, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - at) * self.rate)
        if tokens >= 1.0:
            self._buckets[key] = (tokens - 1.0, now)
            self._forget()
            return 0.0
        self._buckets[key] = (tokens, now)
        return (1.0 - tokens) / self.rate

    def _forget(self) -> None:
        if len(self._buckets) <= MAX_BUCKETS:
            return
        now = self.clock()
        for key, (tokens, at) in list(self._buckets.items()):
            if tokens + (now - at) * self.rate >= self.burst:  # full: as good as new
                del self._buckets[key]
        while len(self._buckets) > MAX_BUCKETS:
            self._buckets.popitem(last=False)


class RateLimitMiddleware:
    def __init__(self, app: ASGIApp, *, buckets: TokenBuckets, admin_token: str | None) -> None:
        self.app = app
        self.buckets = buckets
        self._admin = _digest(admin_token) if admin_token else None
        self._admins: OrderedDict[str, None] = OrderedDict()  # stored admin tokens seen

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(LIMITED):
            await self.app(scope, receive, send)
            return
        key = _key(scope)
        if (self._admin and hmac.compare_digest(key, self._admin)) or key in self._admins:
            await self.app(scope, receive, send)
            return
        wait = self.buckets.take(key)
        if wait > 0:
            seconds = max(1, math.ceil(wait))
            response = status_response(
                429,
                "TooManyRequests",
                f"too many requests: this token may make {self.buckets.rate:g} requests a "
                f"second (bursts of {self.buckets.burst}); retry after {seconds} s",
                **{"Retry-After": str(seconds)},
            )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)
        self._learn(scope, key)

    def _learn(self, scope: Scope, key: str) -> None:
        """A stored token the API authenticated as the admin is not limited from now on."""
        principal = scope.get("state", {}).get("principal")
        role = getattr(principal, "role", None)
        if role is not TokenRole.ADMIN or key.startswith("address:"):
            return
        self._admins[key] = None
        while len(self._admins) > MAX_ADMINS:
            self._admins.popitem(last=False)


def _key(scope: Scope) -> str:
    for name, value in scope.get("headers") or ():
        if name == b"authorization" and value[:7].lower() == b"bearer ":
            return _digest(value[7:].strip().decode("latin-1"))
    client = scope.get("client")
    return f"address:{client[0] if client else '?'}"


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()
