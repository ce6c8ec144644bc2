"""Kubernetes PriorityClasses (`scheduling.k8s.io/v1`) a job's `priorityClassName` names."""

from __future__ import annotations

from sqlalchemy import String, Text
from sqlalchemy.orm import Mapped, mapped_column

from volcano_global.db.base import Base, Timestamps, UUIDPrimaryKey


class PriorityClassRow(UUIDPrimaryKey, Timestamps, Base):
    __tablename__ = "priority_classes"

    name: Mapped[str] = mapped_column(String(253), unique=True)
    value: Mapped[int] = mapped_column()
    preemption_policy: Mapped[str] = mapped_column(String(32), default="PreemptLowerPriority")
    global_default: Mapped[bool] = mapped_column(default=False)
    description: Mapped[str] = mapped_column(Text, default="")
