"""Queues: the unit of fair share and quota, as Volcano's Queue."""

from __future__ import annotations

from typing import Any

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from volcano_global.db.base import Base, JSONType, Timestamps, UUIDPrimaryKey


class Queue(UUIDPrimaryKey, Timestamps, Base):
    """The Volcano Queue document's spec and metadata are kept as written (`spec`, `labels`,
    `annotations`); the columns beside them are what the Global reads of it
    (`jobspec/queue_document.py`), kept in step by `services/tenancy/queues.py`."""

    __tablename__ = "queues"

    name: Mapped[str] = mapped_column(String(63), unique=True)
    weight: Mapped[int] = mapped_column(default=1)
    gpu_quota: Mapped[int | None] = mapped_column(default=None)  # spec.capability's GPUs
    priority: Mapped[int] = mapped_column(default=0)
    spec: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    labels: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    annotations: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    state: Mapped[str] = mapped_column(String(16), default="Open")  # Open | Closed
    parent: Mapped[str | None] = mapped_column(String(63), default=None, index=True)
    deserved_gpus: Mapped[int | None] = mapped_column(default=None)
    guarantee_gpus: Mapped[int] = mapped_column(default=0)
    reclaimable: Mapped[bool] = mapped_column(default=True)
