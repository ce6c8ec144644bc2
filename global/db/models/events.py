"""Kubernetes-style events about a job or a cluster; repeats are folded into a count."""

from __future__ import annotations

import enum
import uuid
from datetime import datetime

from sqlalchemy import ForeignKey, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from volcano_global.db.base import Base, UUIDPrimaryKey, str_enum, utcnow


class EventType(enum.StrEnum):
    NORMAL = "Normal"
    WARNING = "Warning"


class Event(UUIDPrimaryKey, Base):
    __tablename__ = "events"
    __table_args__ = (
        Index("ix_events_job_id_last_seen_at", "job_id", "last_seen_at"),
        Index("ix_events_cluster_id_last_seen_at", "cluster_id", "last_seen_at"),
    )

    job_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("jobs.id", ondelete="CASCADE"), default=None
    )
    cluster_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("clusters.id", ondelete="CASCADE"), default=None
    )
    type: Mapped[EventType] = mapped_column(str_enum(EventType), default=EventType.NORMAL)
    reason: Mapped[str] = mapped_column(String(128))
    message: Mapped[str] = mapped_column(Text)
    count: Mapped[int] = mapped_column(default=1)
    first_seen_at: Mapped[datetime] = mapped_column(default=utcnow)
    last_seen_at: Mapped[datetime] = mapped_column(default=utcnow)
    # An audit record's caller: the token's id (None: the admin token of the settings, which
    # has no row) and the address the call came from (services/audit_trail.py).
    token_id: Mapped[uuid.UUID | None] = mapped_column(default=None)
    client_address: Mapped[str | None] = mapped_column(String(64), default=None)
