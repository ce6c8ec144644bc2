"""How long the agent waits before it connects again, by how its stream ended:

- cut, or the Global restarting: soon (0.2 s doubling, capped at the heartbeat interval, so
  that the agent never waits out the Global's NotReady timeout on its own);
- replaced by a newer stream of its cluster (ABORTED): another agent runs with this
  cluster's token (say, the old pod of a rollout): 5 s doubling to 60 s, so that two agents
  take turns slowly instead of replacing each other many times a second;
- token refused (UNAUTHENTICATED, PERMISSION_DENIED; e.g. rotated or revoked) to an agent
  given `--token-file`: nothing changes by retrying at once: 10 s doubling to 5 min, with an
  error naming the remedy; the file is read again before each attempt, so a rotated token
  mounted from a Secret is picked up without a restart. (An agent given `--token` ends with
  one line instead: its token cannot change; `AgentClient._ended`.)"""

from __future__ import annotations

import logging

import grpc

from volcano_global.backoff import Backoff

log = logging.getLogger(__name__)

REFUSED = (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED)


class Reconnect:
    def __init__(self, cluster: str, target: str) -> None:
        self.cluster = cluster
        self.target = target
        self.cut = Backoff(initial=0.2, cap=5.0, jitter=0.5)
        self.replaced = Backoff(initial=5.0, cap=60.0, jitter=0.5)
        self.refused = Backoff(initial=10.0, cap=300.0, jitter=0.25)
        self._next: Backoff = self.cut

    def ended(self, exc: Exception, *, was_up: bool) -> None:
        """The stream ended (or never started) with `exc`; `was_up`: it had been welcomed."""
        if was_up:  # the token worked: a later refusal or cut starts from the start again
            self.cut.reset()
            self.refused.reset()
        code = exc.code() if isinstance(exc, grpc.aio.AioRpcError) else None
        details = exc.details() if isinstance(exc, grpc.aio.AioRpcError) else str(exc)
        if code in REFUSED:
            self._next = self.refused
            log.error(
                "the Global refused the agent of cluster %s: %s %s. Its token was rotated, "
                "revoked or is not this cluster's: give the agent the cluster's current token "
                "(POST /api/v1/clusters/%s/token issues one); retrying slowly",
                self.cluster,
                code.name if code else "",
                details,
                self.cluster,
            )
            return
        if code is grpc.StatusCode.ABORTED:
            self._next = self.replaced
            log.warning(
                "stream of cluster %s taken over: %s. Is a second agent running with this "
                "cluster's token? Retrying slowly",
                self.cluster,
                details,
            )
            return
        self.replaced.reset()  # not a take-over: two agents are not taking turns
        self._next = self.cut
        log.warning("stream to %s ended: %s %s", self.target, code.name if code else "", details)

    def next_delay(self, heartbeat_s: float) -> float:
        """Seconds to wait before connecting again."""
        self.cut.cap = max(heartbeat_s, 1.0)  # the interval the Global asked for
        delay = self._next.next_delay()
        log.info("connecting to %s again in %.1f s", self.target, delay)
        return delay
