"""Bearer tokens, stored as SHA-256 hashes (they are random 256-bit secrets, so a fast hash
is enough: there is nothing to brute-force)."""

from __future__ import annotations

import enum
import uuid
from datetime import datetime

from sqlalchemy import ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from volcano_global.db.base import Base, JSONType, UUIDPrimaryKey, str_enum, utcnow


class TokenRole(enum.StrEnum):
    ADMIN = "admin"
    AGENT = "agent"  # bound to one cluster
    JOB = "job"  # bound to one job: its training processes report measurements
    READER = "reader"  # reads everything, changes nothing
    QUEUE_USER = "queue-user"  # submits to, and sees, only its queues


class ApiToken(UUIDPrimaryKey, Base):
    __tablename__ = "api_tokens"

    name: Mapped[str] = mapped_column(String(128))
    role: Mapped[TokenRole] = mapped_column(str_enum(TokenRole))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    cluster_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("clusters.id", ondelete="CASCADE"), default=None, index=True
    )
    job_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("jobs.id", ondelete="CASCADE"), default=None, index=True
    )
    queues: Mapped[list[str] | None] = mapped_column(JSONType, default=None)  # queue-user only
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime | None] = mapped_column(default=None)
    revoked_at: Mapped[datetime | None] = mapped_column(default=None)
