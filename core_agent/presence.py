"""What the agent tells the Global about the data its cluster holds (`DataPresence`): on each
stream the full list, again with every periodic share list, and between them the names that
became present. Only to a Global whose Welcome says it takes them (an older one would end the
stream), and only from a source that can tell (`data_present() -> set[str]`: the Kubernetes
source; the simulated one holds no data of its own)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from volcano_global.rpc.data import DataPresence
from volcano_global.rpc.v1 import agent_pb2 as pb

log = logging.getLogger(__name__)
FULL = frozenset({"connect", "periodic"})


class PresenceReports:
    def __init__(self, present: Callable[[], set[str]] | None) -> None:
        self._present = present
        self._on = False  # this stream's Global takes DataPresence
        self._sent: set[str] = set()  # names sent on this stream

    def begin(self, welcome: pb.Welcome) -> None:
        """A new stream: nothing sent on it yet."""
        self._on = welcome.data_presence and self._present is not None
        self._sent = set()

    def due(self, reason: str) -> list[pb.AgentMessage]:
        """The messages to send now: every name present for a full list (`reason` in FULL),
        else those not yet sent on this stream; none when there is nothing to say."""
        if not self._on or self._present is None:
            return []
        present = self._present()
        names = present if reason in FULL else present - self._sent
        if not names:
            return []
        if new := names - self._sent:
            log.info("data present in the cluster (%s): %s", reason, sorted(new))
        self._sent |= names
        return [
            pb.AgentMessage(data=message.to_proto())
            for message in DataPresence.messages(names, reason=reason)
        ]
