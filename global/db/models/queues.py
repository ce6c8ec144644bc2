"""Queues: the unit of fair share and quota, as Volcano's Queue."""

from __future__ import annotations

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from volcano_global.db.base import Base, Timestamps, UUIDPrimaryKey


class Queue(UUIDPrimaryKey, Timestamps, Base):
    __tablename__ = "queues"

    name: Mapped[str] = mapped_column(String(63), unique=True)
    weight: Mapped[int] = mapped_column(default=1)
    gpu_quota: Mapped[int | None] = mapped_column(default=None)
    priority: Mapped[int] = mapped_column(default=0)
