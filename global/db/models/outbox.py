"""The dispatch outbox: messages to a cluster's agent (share assignments, cancellations),
written in the same transaction as the decision and delivered at least once over whichever
replica holds the agent's stream, until the agent acknowledges them."""

from __future__ import annotations

import enum
import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, Index
from sqlalchemy.orm import Mapped, mapped_column

from volcano_global.db.base import Base, JSONType, UUIDPrimaryKey, str_enum, utcnow


class OutboxKind(enum.StrEnum):
    ASSIGN = "Assign"
    CANCEL = "Cancel"


class OutboxMessage(UUIDPrimaryKey, Base):
    __tablename__ = "outbox"
    __table_args__ = (Index("ix_outbox_cluster_id_acked_at", "cluster_id", "acked_at"),)

    cluster_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("clusters.id", ondelete="CASCADE"))
    placement_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("placements.id", ondelete="CASCADE"), index=True
    )
    kind: Mapped[OutboxKind] = mapped_column(str_enum(OutboxKind))
    payload: Mapped[dict[str, Any]] = mapped_column(JSONType)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    acked_at: Mapped[datetime | None] = mapped_column(default=None)
