"""The data an agent finds in its cluster, on the wire (`DataPresence`): the names of the
DataSources whose bytes are there, checked the same way by the agent (which ignores a label
that cannot name one) and by the Global (which refuses a message that breaks the rules)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from volcano_global.errors import Invalid
from volcano_global.jobspec.object_metadata import SUBDOMAIN
from volcano_global.rpc.v1 import agent_pb2 as pb

MAX_NAME = 253  # a DataSource's metadata.name: a DNS subdomain
MAX_SOURCES = 4096  # names in one message (~1 MiB at most); a longer list goes in several


def is_data_source_name(text: str) -> bool:
    """Whether `text` can be a DataSource's name (a DNS-1123 subdomain of at most 253)."""
    return 0 < len(text) <= MAX_NAME and SUBDOMAIN.fullmatch(text) is not None


@dataclass(frozen=True, slots=True, kw_only=True)
class DataPresence:
    """Data sources present in the agent's cluster. `reason`: "connect" or "periodic" (the
    full list) or "added" (names that became present since)."""

    sources: tuple[str, ...]
    reason: str = ""

    def to_proto(self) -> pb.DataPresence:
        return pb.DataPresence(sources=self.sources, reason=self.reason)

    @classmethod
    def from_proto(cls, message: pb.DataPresence) -> DataPresence:
        """Raises Invalid naming the field: too many names, or one that is not a name."""
        if len(message.sources) > MAX_SOURCES:
            raise Invalid.one(
                "data.sources", f"{len(message.sources)} names: at most {MAX_SOURCES} a message"
            )
        for index, name in enumerate(message.sources):
            if not is_data_source_name(name):
                raise Invalid.one(
                    f"data.sources[{index}]",
                    f"{name[:80]!r} is not a DataSource name (a DNS subdomain, <= {MAX_NAME})",
                )
        if len(message.reason) > 32 or not message.reason.isprintable():
            raise Invalid.one("data.reason", "must be at most 32 printable characters")
        return cls(sources=tuple(message.sources), reason=message.reason)

    @classmethod
    def messages(cls, names: Iterable[str], *, reason: str) -> list[DataPresence]:
        """`names` (sorted, each once) in as many messages as the limit asks."""
        ordered = sorted(set(names))
        return [
            cls(sources=tuple(ordered[i : i + MAX_SOURCES]), reason=reason)
            for i in range(0, len(ordered), MAX_SOURCES)
        ]
