"""The wire between the Global and its agents as domain types: the share assignments and
cancellations the Global sends (kept in its outbox as JSON payloads until acknowledged), the
status an agent reports, and the phases of a share. Each type converts to and from its message
in v1/ (generated from proto/), so that no other module spells a message out field by field."""

from __future__ import annotations

import enum
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Generic, Self, TypeVar

from google.protobuf.message import Message

from volcano_global.rpc.v1 import agent_pb2 as pb

M = TypeVar("M", bound=Message)


class SharePhase(enum.StrEnum):
    """Where a cluster's share of a job stands, by the name the Global stores and shows."""

    ASSIGNED = "Assigned"  # the Global's own, before any report: agents never send it
    STAGING = "Staging"  # its data is being copied into the cluster, before its Volcano Jobs
    ACCEPTED = "Accepted"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    CANCELLED = "Cancelled"
    # Volcano restarted the share in its cluster on its own. Reported, never stored: the
    # Global stores the share as Failed (old replicas read the column during a rolling
    # upgrade) and restarts the job everywhere.
    RESTARTING = "Restarting"

    @property
    def progress(self) -> int:
        """How far the share has come: a report of less is an old one resent (Failed and
        Cancelled are the furthest, from any phase)."""
        return _PROGRESS[self]

    def to_proto(self) -> pb.SharePhase:
        if self is SharePhase.ASSIGNED:
            raise ValueError("Assigned is the Global's phase: agents do not report it")
        return _TO_PROTO[self]

    @classmethod
    def from_proto(cls, value: int) -> SharePhase:
        """The reported phase; ValueError for SHARE_PHASE_UNSPECIFIED or a value this
        version does not know."""
        phase = _FROM_PROTO.get(value)
        if phase is None:
            known = ", ".join(pb.SharePhase.Name(v) for v in _FROM_PROTO)
            what = "must be set" if value == pb.SHARE_PHASE_UNSPECIFIED else f"unknown {value}"
            raise ValueError(f"{what}: one of {known}")
        return phase


_PROGRESS = {
    SharePhase.ASSIGNED: 0,
    SharePhase.STAGING: 1,
    SharePhase.ACCEPTED: 2,
    SharePhase.RUNNING: 3,
    SharePhase.SUCCEEDED: 4,
    SharePhase.FAILED: 5,
    SharePhase.CANCELLED: 5,
    SharePhase.RESTARTING: 5,
}
# By name (SHARE_PHASE_RUNNING <-> Running): a phase missing on either side fails at import.
_TO_PROTO = {
    phase: pb.SharePhase.Value(f"SHARE_PHASE_{phase.name}")
    for phase in SharePhase
    if phase is not SharePhase.ASSIGNED
}
_FROM_PROTO = {value: phase for phase, value in _TO_PROTO.items()}
# Every phase this version accepts in a report (sent in Welcome.share_phases).
ACCEPTED_PHASES: tuple[int, ...] = tuple(sorted(_FROM_PROTO))
# What a Global that sends no Welcome.share_phases accepts: the phases before Restarting. (A
# Global that does not list Staging never sends staging items: no share of it stages.)
_OLDER_GLOBAL_PHASES = frozenset(
    _TO_PROTO[p]
    for p in (
        SharePhase.ACCEPTED,
        SharePhase.RUNNING,
        SharePhase.SUCCEEDED,
        SharePhase.FAILED,
        SharePhase.CANCELLED,
    )
)


def phases_accepted(welcome: pb.Welcome) -> frozenset[int]:
    """The report phases the Global that sent `welcome` accepts."""
    return frozenset(welcome.share_phases) or _OLDER_GLOBAL_PHASES


def report_for(report: pb.JobStatusReport, accepted: frozenset[int]) -> pb.JobStatusReport:
    """The report as a Global accepting only `accepted` phases can take it (an older Global
    refuses an unknown phase and ends the stream): Restarting becomes Failed, the nearest
    outcome it knows (it then applies the job's PodFailed policy instead of restarting)."""
    if report.phase in accepted or report.phase != pb.SHARE_PHASE_RESTARTING:
        return report
    older = pb.JobStatusReport()
    older.CopyFrom(report)
    older.phase, older.phase_name = pb.SHARE_PHASE_FAILED, SharePhase.FAILED.value
    older.message = "restarted in its cluster" + (f": {report.message}" if report.message else "")
    return older


class _Wire(Generic[M]):
    """A dataclass whose fields are its protobuf message's, under the same names; its outbox
    payload is the same fields as JSON. `_nested` names its repeated message fields (a tuple of
    another _Wire type each)."""

    __slots__ = ()
    _message: type[M]
    _nested: Mapping[str, type[_Wire[Any]]] = {}

    def to_payload(self) -> dict[str, Any]:
        values = {name: getattr(self, name) for name in _names(type(self))}
        for name in self._nested:
            values[name] = [item.to_payload() for item in values[name]]
        return {k: dict(v) if type(v) is dict else v for k, v in values.items()}  # maps copied

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Self:
        """Keys this version does not know are ignored (a newer writer); a missing key takes
        its field's default (an acknowledged assignment's job token is scrubbed)."""
        values = {name: payload[name] for name in _names(cls) if name in payload}
        for name, kind in cls._nested.items():
            if name in values:
                values[name] = tuple(kind.from_payload(item) for item in values[name] or ())
        return cls(**values)

    def to_proto(self) -> M:
        values = {name: getattr(self, name) for name in _names(type(self))}
        for name in self._nested:
            values[name] = [item.to_proto() for item in values[name]]
        return self._message(**values)

    @classmethod
    def from_proto(cls, message: M) -> Self:
        values = {name: getattr(message, name) for name in _names(cls)}
        for name, kind in cls._nested.items():
            values[name] = tuple(kind.from_proto(item) for item in values[name])
        return cls(**{k: dict(v) if isinstance(v, Mapping) else v for k, v in values.items()})


@functools.cache
def _names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(cls))


@dataclass(frozen=True, slots=True, kw_only=True)
class StagingItem(_Wire[pb.StagingItem]):
    """One copy a share waits for before it starts: a data source's bytes from the cluster
    that holds them to where the share's pods read them, at the bandwidth reserved for it."""

    _message = pb.StagingItem

    data_source: str
    bytes: int
    destination: str  # a path or URI in the share's cluster
    source_cluster: str = ""
    source_uri: str = ""  # where the bytes are in `source_cluster`, when known
    gbps: float = 0.0  # reserved on the links between the two clusters

    @property
    def seconds(self) -> float:
        """How long the copy takes at the reserved bandwidth (0 without one)."""
        return self.bytes * 8 / (self.gbps * 1e9) if self.gbps > 0 else 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareAssignment(_Wire[pb.ShareAssignment]):
    """The part of a job one cluster runs, as its agent needs it (see the message in
    proto/volcano_global/rpc/v1/agent.proto). Applying it twice must change nothing."""

    _message = pb.ShareAssignment

    placement_id: str
    generation: int
    job_uid: str
    job_name: str
    namespace: str
    pods: int
    rank_offset: int  # rank of the share's first pod in the whole job of `world_pods` pods
    world_pods: int
    cluster_index: int  # the share's position among the job's shares (rank order)
    cluster_count: int
    rendezvous_address: str  # where rank 0 of the whole job listens (host:port)
    member_job_name: str = ""  # empty: derived from the job's name and the placement
    manifest_json: str = ""  # the submitted document, for the Kubernetes source
    gpus_per_pod: int = 0
    gpu_model: str = ""
    domains: dict[str, int] = field(default_factory=dict)  # leaf HyperNode -> pods
    duration_seconds: float = 0.0  # how long the job runs, for simulated clusters
    job_token: str = ""  # lets the job's processes report measurements for this job only
    queue_json: str = ""  # the job's Volcano Queue document, made to exist in the cluster
    staging: tuple[StagingItem, ...] = ()  # data to copy in before the share starts
    _nested = {"staging": StagingItem}

    @property
    def staging_bytes(self) -> int:
        return sum(item.bytes for item in self.staging)

    @property
    def staging_seconds(self) -> float:
        """How long its staging takes at the reserved bandwidths: the copies run side by side
        (one container each), so the slowest one's time."""
        return max((item.seconds for item in self.staging), default=0.0)


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareCancellation(_Wire[pb.ShareCancellation]):
    """Remove every trace of a placement's share from the cluster."""

    _message = pb.ShareCancellation

    placement_id: str
    job_uid: str = ""
    reason: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareStatus:
    """An agent's report on its share (numbered and sent by the agent's client)."""

    placement_id: str
    job_uid: str
    phase: SharePhase
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    message: str = ""  # why the share is where it is (e.g. why it failed)
    warning: str = ""  # what the user should know although the share runs
    staged_bytes: int = 0  # Staging: copied so far (0: the copier does not say)
    staging_bytes: int = 0  # Staging: to copy in all

    def to_proto(self) -> pb.JobStatusReport:
        return pb.JobStatusReport(
            placement_id=self.placement_id,
            job_uid=self.job_uid,
            phase=self.phase.to_proto(),
            phase_name=self.phase.value,  # for a Global of the release before SharePhase
            running=self.running,
            succeeded=self.succeeded,
            failed=self.failed,
            message=self.message,
            warning=self.warning,
            staged_bytes=self.staged_bytes,
            staging_bytes=self.staging_bytes,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class HeldShare:
    """A share a cluster holds, as its agent lists it in a `ShareInventory`."""

    placement_id: str
    job_uid: str
    phase: SharePhase
    generation: int = 0
    applying: bool = False  # received, still being applied

    def to_proto(self) -> pb.HeldShare:
        return pb.HeldShare(
            placement_id=self.placement_id,
            generation=self.generation,
            job_uid=self.job_uid,
            phase=self.phase.to_proto(),
            applying=self.applying,
        )
