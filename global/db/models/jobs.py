"""Jobs: the submitted document as received, its normalized gang and lifecycle, and its state."""

from __future__ import annotations

import enum
import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, ForeignKey, Index, String, Text, text, true
from sqlalchemy.orm import Mapped, mapped_column, relationship

from volcano_global.db.base import Base, JSONType, UUIDPrimaryKey, str_enum, utcnow
from volcano_global.db.models.queues import Queue
from volcano_global.db.types import StoredModel, StoredModels
from volcano_global.jobspec.model import Communication, Gang, LifecyclePolicy, SplitPolicy


class JobState(enum.StrEnum):
    PENDING = "Pending"
    PLACED = "Placed"
    DISPATCHED = "Dispatched"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    CANCELLED = "Cancelled"


TERMINAL_JOB_STATES = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED})
ACTIVE_NAME_INDEX = "uq_jobs_active_namespace_name"
_ACTIVE_PREDICATE = text("state NOT IN ('Succeeded', 'Failed', 'Cancelled')")


class Job(UUIDPrimaryKey, Base):
    __tablename__ = "jobs"
    __table_args__ = (
        # A name is taken while its job is alive; a finished job's name can be submitted again.
        Index(
            ACTIVE_NAME_INDEX,
            "namespace",
            "name",
            unique=True,
            sqlite_where=_ACTIVE_PREDICATE,
            postgresql_where=_ACTIVE_PREDICATE,
        ),
        Index("ix_jobs_state_priority", "state", "priority"),
        Index("ix_jobs_queue_id_submitted_at", "queue_id", "submitted_at"),
        Index("ix_jobs_submitted_at_id", "submitted_at", "id"),
        # A watch's cursor (the Kubernetes-compatible API and `vglobal get -w` read changes in
        # updated_at order); the Kubernetes API finds an object by namespace and name.
        Index("ix_jobs_updated_at", "updated_at"),
        Index("ix_jobs_namespace_name", "namespace", "name"),
    )

    name: Mapped[str] = mapped_column(String(63))
    namespace: Mapped[str] = mapped_column(String(63))
    kind: Mapped[str] = mapped_column(String(16))
    api_version: Mapped[str] = mapped_column(String(64))
    queue_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("queues.id", ondelete="RESTRICT"))
    priority: Mapped[int] = mapped_column(default=0)
    priority_class_name: Mapped[str | None] = mapped_column(String(253), default=None)
    # The class's preemptionPolicy when the job was submitted (PreemptLowerPriority | Never)
    preemption_policy: Mapped[str | None] = mapped_column(String(32), default=None)

    source: Mapped[str] = mapped_column(Text)
    source_format: Mapped[str] = mapped_column(String(8))
    manifest: Mapped[dict[str, Any]] = mapped_column(JSONType)
    # What the parser derived from it (jobspec), read back as the models it wrote.
    gang: Mapped[Gang] = mapped_column(StoredModel(Gang))
    communication: Mapped[Communication | None] = mapped_column(
        StoredModel(Communication), default=None
    )
    split_policy: Mapped[SplitPolicy] = mapped_column(StoredModel(SplitPolicy))
    # False: annotated `volcano.sh/preemptable: "false"` (Volcano's annotation), never evicted
    # nor shrunk for another job.
    preemptable: Mapped[bool] = mapped_column(default=True, server_default=true())
    # GPU-seconds its ended runs received (each eviction or demotion adds its run's): its
    # attained service, which time-sharing compares (solver/timesharing.py).
    attained_gpu_s: Mapped[float] = mapped_column(default=0.0, server_default="0")
    total_pods: Mapped[int]
    total_gpus: Mapped[int]
    gpu_model: Mapped[str | None] = mapped_column(String(128), default=None)
    # The lifecycle the parser read (jobspec's `Lifecycle`): dispatch and gang supervision
    # read these (services/lifecycle/jobs.lifecycle_of), not the document. NULL: stored by a
    # replica of before these columns, while a rolling upgrade has both serving.
    running_estimate_seconds: Mapped[float | None] = mapped_column(default=None)
    lifecycle_policies: Mapped[list[LifecyclePolicy] | None] = mapped_column(
        StoredModels(LifecyclePolicy), default=None
    )
    max_retry: Mapped[int | None] = mapped_column(default=None)
    gang_start_timeout_seconds: Mapped[int | None] = mapped_column(default=None)

    state: Mapped[JobState] = mapped_column(str_enum(JobState), default=JobState.PENDING)
    state_message: Mapped[str] = mapped_column(Text, default="")
    pending_reason: Mapped[str | None] = mapped_column(Text, default=None)
    submitted_by: Mapped[str] = mapped_column(String(128), default="")
    # Times the job went back to Pending after it had started (cluster lost, RestartJob).
    requeues: Mapped[int] = mapped_column(default=0)
    # What the job's training processes measured (step time, bytes per step), if reported.
    measurements: Mapped[dict[str, Any] | None] = mapped_column(JSONType, default=None)
    # The newest checkpoint its training processes reported saving (preemption counts the
    # work an eviction loses from it, when it belongs to the current run).
    checkpointed_at: Mapped[datetime | None] = mapped_column(default=None)
    checkpoint_step: Mapped[int | None] = mapped_column(BigInteger, default=None)

    submitted_at: Mapped[datetime] = mapped_column(default=utcnow)
    placed_at: Mapped[datetime | None] = mapped_column(default=None)
    dispatched_at: Mapped[datetime | None] = mapped_column(default=None)
    started_at: Mapped[datetime | None] = mapped_column(default=None)
    finished_at: Mapped[datetime | None] = mapped_column(default=None)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)
    # Deleted through the Kubernetes-compatible API (`kubectl delete`): gone from that view,
    # kept in the job history (`/api/v1/jobs`) like any finished job.
    deleted_at: Mapped[datetime | None] = mapped_column(default=None)

    queue: Mapped[Queue] = relationship(lazy="joined")

    @property
    def is_terminal(self) -> bool:
        return self.state in TERMINAL_JOB_STATES


# A round reads each queue's first waiting jobs by (priority descending, submission) along
# this index and stops at its limit (`services/scheduling/heads.py`); a submission's queue
# counts its pending jobs on its (queue, state) prefix (`services/jobs/pending_limits.py`).
Index(
    "ix_jobs_queue_waiting",
    Job.queue_id,
    Job.state,
    Job.priority.desc(),
    Job.submitted_at,
    Job.id,
)
