"""Per-cluster inventory: the topology tree (mirroring Volcano HyperNodes) and the nodes."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    ColumnElement,
    ForeignKey,
    Index,
    String,
    UniqueConstraint,
    and_,
)
from sqlalchemy.orm import Mapped, mapped_column

from volcano_global.db.base import Base, JSONType, UUIDPrimaryKey, utcnow


class TopologyDomain(UUIDPrimaryKey, Base):
    """One HyperNode: a network domain of `tier` (1 = closest to the nodes) inside a cluster."""

    __tablename__ = "topology_domains"
    __table_args__ = (UniqueConstraint("cluster_id", "name"),)

    cluster_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("clusters.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(253))
    tier: Mapped[int]
    tier_name: Mapped[str | None] = mapped_column(String(63), default=None)
    parent_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("topology_domains.id", ondelete="CASCADE"), default=None, index=True
    )


NODES_FILLFACTOR = 85  # percent of each page of `nodes` that inserts fill (Postgres)


class Node(UUIDPrimaryKey, Base):
    __tablename__ = "nodes"
    __table_args__ = (
        UniqueConstraint("cluster_id", "name"),
        Index("ix_nodes_domain_id", "domain_id"),
        # Room on each page for a row's next version: an update that changes no indexed
        # column then stays on its page and writes no index entry (HOT; migration 0033).
        {"postgresql_with": {"fillfactor": NODES_FILLFACTOR}},
    )

    cluster_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("clusters.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(253))
    gpu_model: Mapped[str | None] = mapped_column(String(128), default=None)
    gpu_allocatable: Mapped[int] = mapped_column(default=0)
    cpu_allocatable_millis: Mapped[int] = mapped_column(BigInteger, default=0)
    memory_allocatable_bytes: Mapped[int] = mapped_column(BigInteger, default=0)
    ready: Mapped[bool] = mapped_column(default=True)
    schedulable: Mapped[bool] = mapped_column(default=True)
    domain_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("topology_domains.id", ondelete="SET NULL"), default=None
    )
    labels: Mapped[dict[str, Any]] = mapped_column(default=dict)
    taints: Mapped[list[dict[str, Any]]] = mapped_column(JSONType, default=list)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)
    # The cluster's inventory sequence of the snapshot or delta that last wrote the node's row
    # (a usage writes its NodeUse row only; not indexed: readers of what changed go through
    # `NodeChange`).
    seq: Mapped[int] = mapped_column(BigInteger, default=0)


class NodeUse(Base):
    """What the pods on a stored node use, in a row of its own: agents' usages change many
    nodes a second, and an update of this narrow row writes a third of the pages the node's
    whole row did (docs/benchmarks.md, "Where SQLite's deltas go, session 21"). Every node
    has one, written and removed with it by the inventory's writers (`snapshots`, `deltas`,
    `clusters.delete_cluster`): no foreign key, whose check a row at a time cost Postgres
    a fifth more on a full sync of 500,000 nodes."""

    __tablename__ = "node_usages"
    __table_args__ = (
        {"sqlite_with_rowid": False, "postgresql_with": {"fillfactor": NODES_FILLFACTOR}},
    )

    cluster_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(253), primary_key=True)
    gpu_used: Mapped[int] = mapped_column(default=0)
    cpu_used_millis: Mapped[int] = mapped_column(BigInteger, default=0)
    memory_used_bytes: Mapped[int] = mapped_column(BigInteger, default=0)
    # The cluster's inventory sequence of the snapshot, delta or usage that last wrote it.
    seq: Mapped[int] = mapped_column(BigInteger, default=0)


# A node's usage row, for readers of both: `select(...).join(NodeUse, NODE_USE)`.
NODE_USE: ColumnElement[bool] = and_(
    NodeUse.cluster_id == Node.cluster_id, NodeUse.name == Node.name
)


class NodeChange(Base):
    """The nodes one transaction of deltas upserted in a cluster, at the sequence it stored,
    as written (name, domain and capacity columns: `services/inventory/node_changes.py`): the
    scheduler's capacity view reads what changed since its last read from these rows, so no
    index on `nodes` moves with every update. Pruned by the writers by the nodes it holds
    (`node_changes.kept_nodes`)."""

    __tablename__ = "node_changes"

    cluster_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("clusters.id", ondelete="CASCADE"), primary_key=True
    )
    seq: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    # json, not JSONB, on Postgres: written once, read whole, never queried inside (migration
    # 0031 also compresses it with lz4).
    nodes: Mapped[list[list[Any]]] = mapped_column(JSON)
    node_count: Mapped[int] = mapped_column(default=0)  # len(nodes), read by the pruning
