"""Copies that belong to no share, on the wire: the Global's `DataCopyAssignment` and
`DataCopyCancellation`, and the agent's `DataCopyReport` (proto/volcano_global/rpc/v1)."""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass

from volcano_global.errors import Invalid
from volcano_global.rpc.shares import StagingItem, _Wire
from volcano_global.rpc.v1 import agent_pb2 as pb

MAX_BYTES = 2**63 - 1  # a BIGINT column's largest value
# How an agent's reason begins for a copy it refuses for its namespace (a system namespace,
# its own): the job's choice, not its cluster's fault. The Global leaves such failures out
# of a cluster's run of failed copies (`services/data/copies.py`): one wording for both.
NAMESPACE_REFUSED = "the agent creates no job in"


class CopyPhase(enum.StrEnum):
    """What an agent reports of a copy."""

    COPYING = "Copying"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    STOPPED = "Stopped"

    @property
    def ended(self) -> bool:
        return self is not CopyPhase.COPYING


_TO_PROTO = {phase: pb.CopyPhase.Value(f"COPY_PHASE_{phase.name}") for phase in CopyPhase}
_FROM_PROTO = {value: phase for phase, value in _TO_PROTO.items()}


@dataclass(frozen=True, slots=True, kw_only=True)
class DataCopyAssignment(_Wire[pb.DataCopyAssignment]):
    """A copy into the agent's cluster (see the message). Applying it twice changes nothing."""

    _message = pb.DataCopyAssignment

    copy_id: str
    namespace: str
    name: str
    item: StagingItem
    job_uid: str = ""

    def to_proto(self) -> pb.DataCopyAssignment:
        return pb.DataCopyAssignment(
            copy_id=self.copy_id,
            namespace=self.namespace,
            name=self.name,
            job_uid=self.job_uid,
            item=self.item.to_proto(),
        )

    @classmethod
    def from_proto(cls, message: pb.DataCopyAssignment) -> DataCopyAssignment:
        return cls(
            copy_id=message.copy_id,
            namespace=message.namespace,
            name=message.name,
            job_uid=message.job_uid,
            item=StagingItem.from_proto(message.item),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class DataCopyCancellation(_Wire[pb.DataCopyCancellation]):
    _message = pb.DataCopyCancellation

    copy_id: str
    reason: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class CopyStatus:
    """An agent's word on a copy: where it stands."""

    copy_id: str
    phase: CopyPhase
    staged_bytes: int = 0
    bytes: int = 0
    message: str = ""

    def to_proto(self) -> pb.DataCopyReport:
        return pb.DataCopyReport(
            copy_id=self.copy_id,
            phase=_TO_PROTO[self.phase],
            staged_bytes=self.staged_bytes,
            bytes=self.bytes,
            message=self.message,
        )

    @classmethod
    def from_proto(cls, message: pb.DataCopyReport) -> CopyStatus:
        """Raises Invalid naming the field: no phase, a copy id that is no UUID, or a count of
        bytes beyond what the database stores (a BIGINT)."""
        phase = _FROM_PROTO.get(message.phase)
        if phase is None:
            raise Invalid.one("copy_report.phase", f"must be one of {', '.join(CopyPhase)}")
        try:
            uuid.UUID(message.copy_id)
        except ValueError:
            raise Invalid.one("copy_report.copy_id", "must be a copy's id (a UUID)") from None
        for name in ("staged_bytes", "bytes"):
            if getattr(message, name) > MAX_BYTES:
                raise Invalid.one(f"copy_report.{name}", f"must be at most {MAX_BYTES}")
        return cls(
            copy_id=message.copy_id,
            phase=phase,
            staged_bytes=message.staged_bytes,
            bytes=message.bytes,
            message=message.message[:2000],
        )
