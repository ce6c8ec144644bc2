"""Copies of data that belong to no share: made while a job waits, so that its data is in the
cluster expected to have room for it before that room comes (prefetch), or for any other
purpose a round plans a copy for (docs/data.md). The destination cluster's agent runs the copy
(the same staging Job a share's copy runs as); its link bandwidth is a `LinkReservation` with
`copy_id`, deleted when the copy ends."""

from __future__ import annotations

import enum
import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, ForeignKey, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column, relationship

from volcano_global.db.base import Base, JSONType, UUIDPrimaryKey, str_enum, utcnow
from volcano_global.db.models.clusters import Cluster
from volcano_global.rpc.copies import CopyCause


class CopyState(enum.StrEnum):
    PENDING = "Pending"  # written, its agent has not reported on it yet
    COPYING = "Copying"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    STOPPING = "Stopping"  # no longer wanted: its agent is told to stop it
    STOPPED = "Stopped"


# A copy in these states runs (or is about to) in its destination cluster.
RUNNING_COPY = (CopyState.PENDING, CopyState.COPYING)


class DataCopy(UUIDPrimaryKey, Base):
    """One copy of `data_source` from `source_cluster` into `destination_cluster` at `gbps`,
    for `job` (None: for no job in particular) and `purpose` (`prefetch`). `item`: the
    StagingItem payload the agent receives."""

    __tablename__ = "data_copies"
    __table_args__ = (
        Index("ix_data_copies_destination_cluster_id_state", "destination_cluster_id", "state"),
    )

    data_source: Mapped[str] = mapped_column(String(253))
    source_cluster_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("clusters.id", ondelete="CASCADE"), index=True
    )
    destination_cluster_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("clusters.id", ondelete="CASCADE")
    )
    bytes: Mapped[int] = mapped_column(BigInteger)
    gbps: Mapped[float]
    job_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("jobs.id", ondelete="SET NULL"), index=True, default=None
    )
    # The job's uid, kept when its row goes (job_id NULL): the failures of deleted jobs are
    # still told apart (`copy_backoff`). NULL: made before migration 0031, or by a replica
    # from before it.
    job_uid: Mapped[uuid.UUID | None] = mapped_column(default=None)
    purpose: Mapped[str] = mapped_column(String(32))
    namespace: Mapped[str] = mapped_column(String(63))  # where its staging Job runs
    item: Mapped[dict[str, Any]] = mapped_column(JSONType)
    state: Mapped[CopyState] = mapped_column(
        str_enum(CopyState, length=16), default=CopyState.PENDING
    )
    staged_bytes: Mapped[int] = mapped_column(BigInteger, default=0)
    message: Mapped[str] = mapped_column(Text, default="")  # the agent's last word on it
    reason: Mapped[str] = mapped_column(Text, default="")  # why it failed or was stopped
    # What a failure blames (None: not failed), recorded when it fails: `copy_backoff` reads
    # it, never the reason's words.
    cause: Mapped[CopyCause | None] = mapped_column(str_enum(CopyCause), default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    reported_at: Mapped[datetime | None] = mapped_column(default=None)
    ended_at: Mapped[datetime | None] = mapped_column(default=None)

    source_cluster: Mapped[Cluster] = relationship(
        foreign_keys=[source_cluster_id], lazy="joined", innerjoin=True
    )
    destination_cluster: Mapped[Cluster] = relationship(
        foreign_keys=[destination_cluster_id], lazy="joined", innerjoin=True
    )
