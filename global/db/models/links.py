"""Network links between member clusters."""

from __future__ import annotations

import uuid

from sqlalchemy import CheckConstraint, ForeignKey, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from volcano_global.db.base import Base, Timestamps, UUIDPrimaryKey
from volcano_global.db.models.clusters import Cluster


class Link(UUIDPrimaryKey, Timestamps, Base):
    """An undirected link between two clusters, stored once with `cluster_a` the one whose name
    sorts first. Capacity is per direction (full duplex). What running jobs reserve on it is the
    sum of the active placements' link reservations, never a stored counter."""

    __tablename__ = "links"
    __table_args__ = (
        UniqueConstraint("cluster_a_id", "cluster_b_id"),
        CheckConstraint("cluster_a_id <> cluster_b_id", name="distinct_ends"),
        CheckConstraint("capacity_gbps > 0", name="positive_capacity"),
    )

    cluster_a_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("clusters.id", ondelete="CASCADE"))
    cluster_b_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("clusters.id", ondelete="CASCADE"), index=True
    )
    capacity_gbps: Mapped[float]
    latency_ms: Mapped[float] = mapped_column(default=0.0)

    cluster_a: Mapped[Cluster] = relationship(foreign_keys=[cluster_a_id], lazy="joined")
    cluster_b: Mapped[Cluster] = relationship(foreign_keys=[cluster_b_id], lazy="joined")
