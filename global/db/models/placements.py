"""Placements: a job's shares per cluster and the link bandwidth they reserve, per round."""

from __future__ import annotations

import enum
import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, Index, String, Text, text
from sqlalchemy.orm import Mapped, mapped_column, relationship

from volcano_global.db.base import Base, JSONType, UUIDPrimaryKey, str_enum, utcnow
from volcano_global.db.models.clusters import Cluster
from volcano_global.db.models.links import Link
from volcano_global.rpc.shares import SharePhase


class PlacementState(enum.StrEnum):
    ACTIVE = "Active"  # holds capacity and link bandwidth
    WITHDRAWN = "Withdrawn"  # taken back before the job ran (gang timeout, stale round)
    RELEASED = "Released"  # the job finished or was cancelled
    # A preemptor's: holds capacity and link bandwidth, nothing dispatched, until every
    # placement in `awaits` (its victims') is gone in every cluster; then Active.
    NOMINATED = "Nominated"


HOLDING = (PlacementState.ACTIVE, PlacementState.NOMINATED)  # hold capacity and links
# The HOLDING states, written as an OR: SQLite uses a partial index only when the query's
# condition implies the index's, and its proof follows the arms of an OR but not an IN list.
_HOLDING_PREDICATE = text("state = 'Active' OR state = 'Nominated'")


class Placement(UUIDPrimaryKey, Base):
    __tablename__ = "placements"
    __table_args__ = (
        Index("ix_placements_job_id_state", "job_id", "state"),
        # The few placements that hold capacity, beside the history of ended ones. The
        # nomination sweep (`evictions.start_nominated`) and the holds subtracted from free
        # capacity (`snapshot.free_capacity`) find them every loop step by state alone,
        # which the index led by job_id cannot serve.
        Index(
            "ix_placements_holding_state",
            "state",
            sqlite_where=_HOLDING_PREDICATE,
            postgresql_where=_HOLDING_PREDICATE,
        ),
    )

    job_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    generation: Mapped[int]
    state: Mapped[PlacementState] = mapped_column(
        str_enum(PlacementState), default=PlacementState.ACTIVE
    )
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    ended_at: Mapped[datetime | None] = mapped_column(default=None)
    awaits: Mapped[list[str] | None] = mapped_column(JSONType, default=None)

    shares: Mapped[list[ClusterShare]] = relationship(
        cascade="all, delete-orphan", lazy="selectin", order_by="ClusterShare.rank_offset"
    )
    link_reservations: Mapped[list[LinkReservation]] = relationship(
        cascade="all, delete-orphan", lazy="selectin"
    )


class ClusterShare(UUIDPrimaryKey, Base):
    """The part of a job one cluster runs: `pods` pods (`units` whole units), ranks starting at
    `rank_offset`, optionally broken down by topology domain (`domains`: name -> pods)."""

    __tablename__ = "cluster_shares"

    placement_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("placements.id", ondelete="CASCADE"), index=True
    )
    cluster_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("clusters.id", ondelete="RESTRICT"), index=True
    )
    pods: Mapped[int]
    gpus: Mapped[int]
    units: Mapped[int]
    rank_offset: Mapped[int] = mapped_column(default=0)
    domains: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    # The GPU model its pods run on, as dispatched (the job's, or for a HyperJob whose
    # children differ its children's): the books take its GPUs from that model's leaves.
    # None: the job names none, or the share was written before revision 0030 (read as the
    # job's model).
    gpu_model: Mapped[str | None] = mapped_column(String(128), default=None)
    # What the cluster's agent last reported (Assigned: nothing yet).
    phase: Mapped[SharePhase] = mapped_column(
        str_enum(SharePhase, length=16), default=SharePhase.ASSIGNED
    )
    reported_at: Mapped[datetime | None] = mapped_column(default=None)
    message: Mapped[str] = mapped_column(Text, default="")  # the agent's last word on it
    # The copies the share waits for before it starts (StagingItem payloads; None: none),
    # and when its agent reported them done: the gang's start timeout counts from then.
    staging: Mapped[list[dict[str, Any]] | None] = mapped_column(JSONType, default=None)
    staged_at: Mapped[datetime | None] = mapped_column(default=None)

    cluster: Mapped[Cluster] = relationship(lazy="joined")


class LinkReservation(UUIDPrimaryKey, Base):
    """Bandwidth a placement holds on a link: for its whole life (a split's crossing
    traffic), or, with `staging_share_id`, while that share's data is copied in (deleted when
    its staging ends, `dispatch/staging.note_staging`). Either counts in the link's reserved
    sum while the placement holds (`inventory/links.reserved_gbps`). With `copy_id` instead of
    a placement: a copy that belongs to no share (`data_copies`), held until it ends."""

    __tablename__ = "link_reservations"

    placement_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("placements.id", ondelete="CASCADE"), index=True
    )
    link_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("links.id", ondelete="CASCADE"), index=True
    )
    gbps: Mapped[float]
    staging_share_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("cluster_shares.id", ondelete="CASCADE"), index=True, default=None
    )
    copy_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("data_copies.id", ondelete="CASCADE"), index=True, default=None
    )

    link: Mapped[Link] = relationship(lazy="joined")
