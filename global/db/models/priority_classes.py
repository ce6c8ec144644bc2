"""Kubernetes PriorityClasses (`scheduling.k8s.io/v1`) a job's `priorityClassName` names."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Index, String, Text, text
from sqlalchemy.orm import Mapped, mapped_column

from volcano_global.db.base import Base, JSONType, Timestamps, UUIDPrimaryKey


class PriorityClassRow(UUIDPrimaryKey, Timestamps, Base):
    __tablename__ = "priority_classes"
    __table_args__ = (
        # At most one global default, across replicas too.
        Index(
            "ix_priority_classes_one_global_default",
            "global_default",
            unique=True,
            sqlite_where=text("global_default"),
            postgresql_where=text("global_default"),
        ),
    )

    name: Mapped[str] = mapped_column(String(253), unique=True)
    value: Mapped[int] = mapped_column()
    preemption_policy: Mapped[str] = mapped_column(String(32), default="PreemptLowerPriority")
    global_default: Mapped[bool] = mapped_column(default=False)
    description: Mapped[str] = mapped_column(Text, default="")
    # As written (kubectl's last-applied annotation among them): the Kubernetes view keeps them.
    labels: Mapped[dict[str, Any] | None] = mapped_column(JSONType, default=dict)
    annotations: Mapped[dict[str, Any] | None] = mapped_column(JSONType, default=dict)
