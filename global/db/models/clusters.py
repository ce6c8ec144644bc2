"""Member clusters and their capacity summary by GPU model."""

from __future__ import annotations

import enum
import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column, relationship

from volcano_global.db.base import Base, Timestamps, UUIDPrimaryKey, str_enum


class ClusterState(enum.StrEnum):
    UNKNOWN = "Unknown"
    READY = "Ready"
    NOT_READY = "NotReady"


class Cluster(UUIDPrimaryKey, Timestamps, Base):
    __tablename__ = "clusters"

    name: Mapped[str] = mapped_column(String(63), unique=True)
    description: Mapped[str] = mapped_column(String(512), default="")
    labels: Mapped[dict[str, Any]] = mapped_column(default=dict)
    state: Mapped[ClusterState] = mapped_column(
        str_enum(ClusterState), default=ClusterState.UNKNOWN
    )
    last_heartbeat_at: Mapped[datetime | None] = mapped_column(default=None)
    inventory_generation: Mapped[int] = mapped_column(default=0)
    # Last agent inventory sequence applied (snapshots reset it, deltas advance it by one).
    inventory_seq: Mapped[int] = mapped_column(BigInteger, default=0)
    # The last sequence whose delta removed nodes (readers of changes since a sequence re-read
    # the whole cluster when it moved: a removed row leaves nothing to read).
    nodes_removed_seq: Mapped[int] = mapped_column(BigInteger, default=0)
    # The node change log (`NodeChange`) holds every node upsert of this generation at a
    # sequence above `node_changes_floor` and up to `node_changes_seq`; the latter trails
    # `inventory_seq` only after a writer that does not log (a replica of an older release).
    node_changes_floor: Mapped[int] = mapped_column(BigInteger, default=0)
    node_changes_seq: Mapped[int] = mapped_column(BigInteger, default=0)
    node_changes_nodes: Mapped[int] = mapped_column(default=0)  # how many nodes the log holds
    inventory_updated_at: Mapped[datetime | None] = mapped_column(default=None)
    # Raised by each new agent stream: the stream holding this epoch is the cluster's one
    # stream; an older one (of any replica) ends (`services/inventory/agent_streams.py`).
    agent_stream_epoch: Mapped[int] = mapped_column(BigInteger, default=0)
    # Whether its agent runs copies without a share (its last Hello's `data_copies`); None: no
    # agent said since. A round never prefetches into a cluster where it is False.
    runs_copies: Mapped[bool | None] = mapped_column(default=None)
    # How many nodes the inventory holds, and how many of them are ready: kept by the writes
    # of nodes (snapshots, deltas) so listing 100 clusters does not count 500,000 rows.
    nodes_total: Mapped[int] = mapped_column(default=0)
    nodes_ready: Mapped[int] = mapped_column(default=0)

    capacities: Mapped[list[ClusterGpuCapacity]] = relationship(
        back_populates="cluster", cascade="all, delete-orphan", lazy="selectin"
    )


class ClusterGpuCapacity(Base):
    """GPUs of one model in one cluster: total allocatable, and free on ready, schedulable
    nodes. Kept in step with the node inventory; the solver reads this, not the nodes."""

    __tablename__ = "cluster_gpu_capacities"

    cluster_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("clusters.id", ondelete="CASCADE"), primary_key=True
    )
    gpu_model: Mapped[str] = mapped_column(String(128), primary_key=True)
    total_gpus: Mapped[int] = mapped_column(default=0)
    free_gpus: Mapped[int] = mapped_column(default=0)

    cluster: Mapped[Cluster] = relationship(back_populates="capacities")
