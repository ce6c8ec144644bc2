"""Copies that belong to no share, on the wire: the Global's `DataCopyAssignment` and
`DataCopyCancellation`, and the agent's `DataCopyReport` (proto/volcano_global/rpc/v1)."""

from __future__ import annotations

import enum
import re
import uuid
from dataclasses import dataclass

from volcano_global.errors import Invalid
from volcano_global.rpc.shares import StagingItem, _Wire
from volcano_global.rpc.v1 import agent_pb2 as pb

MAX_BYTES = 2**63 - 1  # a BIGINT column's largest value
# How an agent's reason begins for a copy it refuses for its namespace (a system namespace,
# its own). The Global reads these words only from an agent from before `CopyCause`.
NAMESPACE_REFUSED = "the agent creates no job in"
# kube-apiserver's 403s (k8s.io/apiserver) all have the reason `Forbidden`; their message tells
# them apart. RBAC denying a verb in a namespace (`responsewriters.forbiddenMessage`, wrapped
# by `apierrors.NewForbidden` as `<resource>[ "<name>"] is forbidden: ...`); NamespaceLifecycle
# refusing a new object in a namespace being deleted. Others are the cluster's policy: an
# admission webhook (`admission webhook "<name>" denied the request: ...`, Gatekeeper's),
# a ResourceQuota (`... is forbidden: exceeded quota: ...`), a LimitRange, an admission policy.
# Matched at the message's start: a webhook's message may quote RBAC's words after its own.
_RESOURCE_FORBIDDEN = r'[^\s"]+(?: "[^"]*")? is forbidden: '
_RBAC_DENIED = re.compile(
    _RESOURCE_FORBIDDEN
    + r'User "[^"]*" cannot [a-z]+ resource "[^"]*" in API group "[^"]*" in the namespace "'
)
_NAMESPACE_ENDING = re.compile(
    _RESOURCE_FORBIDDEN + r"unable to create new content in namespace \S+ because it is being "
    r"terminated"
)
# A 404's message on the namespace (`apierrors.NewNotFound`, `details.kind` "namespaces").
_MISSING = re.compile(r'namespaces "[^"]+" not found')
# How an agent from before `CopyCause` worded the API server's refusal of a copy's Job.
_CREATING = re.compile(r"creating staging Job \S+: (?P<message>.*)", re.DOTALL)


class CopyCause(enum.StrEnum):
    """What a failed copy blames (`data_copies.cause`, what `copy_backoff` counts): its
    destination cluster, or the job's namespace there; `CLUSTER_LOST`, set by the Global
    alone, the cluster's being lost a while (its agent could not report the end)."""

    DESTINATION = "destination"
    NAMESPACE_REFUSED = "namespace-refused"  # by the agent: kube-*, its own
    NAMESPACE_MISSING = "namespace-missing"  # the API server: no such namespace, or ending
    FORBIDDEN = "forbidden"  # RBAC's 403 on the Job in the job's namespace
    CLUSTER_LOST = "cluster-lost"

    @classmethod
    def of_refusal(cls, *, status: int | None, message: str, kind: str = "") -> CopyCause:
        """What the API server's refusal of a copy's Job blames, by its Status: the job's
        namespace for a 404 on the namespace (`kind` "namespaces", the Status' details) or
        one being deleted (a 403), and for RBAC's 403; the destination for anything else
        (an admission webhook, a quota, an invalid Job: the cluster's policy or copier)."""
        if status == 404:
            return cls.NAMESPACE_MISSING if kind == "namespaces" else cls.DESTINATION
        if status == 403 and _RBAC_DENIED.match(message):
            return cls.FORBIDDEN
        if status == 403 and _NAMESPACE_ENDING.match(message):
            return cls.NAMESPACE_MISSING
        return cls.DESTINATION

    @classmethod
    def of_words(cls, reason: str) -> CopyCause:
        """The cause of a failure an agent from before causes reports, read once from its
        words by the rules an agent now says it by (`of_refusal`): its words do not say the
        status, and the namespace's 404 is its message."""
        if reason.startswith(NAMESPACE_REFUSED):
            return cls.NAMESPACE_REFUSED
        refused = _CREATING.match(reason)
        if refused is None:  # the copier failed, or the list of Jobs was refused
            return cls.DESTINATION
        message = refused["message"]
        if _MISSING.match(message):
            return cls.NAMESPACE_MISSING
        return cls.of_refusal(status=403, message=message)


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
# The causes an agent reports (not `CLUSTER_LOST`: the Global's alone).
_CAUSE_TO_PROTO = {
    cause: pb.CopyCause.Value(f"COPY_CAUSE_{cause.name}")
    for cause in CopyCause
    if cause is not CopyCause.CLUSTER_LOST
}
_CAUSE_FROM_PROTO = {value: cause for cause, value in _CAUSE_TO_PROTO.items()}


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
    """An agent's word on a copy: where it stands; a failure's `cause` (None: unsaid)."""

    copy_id: str
    phase: CopyPhase
    staged_bytes: int = 0
    bytes: int = 0
    message: str = ""
    cause: CopyCause | None = None

    def to_proto(self) -> pb.DataCopyReport:
        return pb.DataCopyReport(
            copy_id=self.copy_id,
            phase=_TO_PROTO[self.phase],
            staged_bytes=self.staged_bytes,
            bytes=self.bytes,
            message=self.message,
            cause=_CAUSE_TO_PROTO[self.cause] if self.cause in _CAUSE_TO_PROTO else 0,
        )

    @classmethod
    def from_proto(cls, message: pb.DataCopyReport) -> CopyStatus:
        """Raises Invalid naming the field: no phase, a copy id that is no UUID, or a count of
        bytes beyond what the database stores (a BIGINT). A cause this Global does not know
        is unsaid (None)."""
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
            cause=_CAUSE_FROM_PROTO.get(message.cause),
        )
