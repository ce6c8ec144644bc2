"""Data as inventory and as jobs' needs: Volcano Global's DataSources (where a dataset is) and
DataSourceClaims (which workload reads it), and the newest checkpoint each job reported (where
it was written, how large). The documents are kept as written; the columns beside them are what
the Global reads of them (`jobspec/data_sources.py`)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, ForeignKey, Index, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from volcano_global.db.base import Base, JSONType, Timestamps, UUIDPrimaryKey, utcnow


class DataSourceRow(UUIDPrimaryKey, Timestamps, Base):
    """A DataSource (cluster-scoped). `clusters`: the clusters that hold it now; a document
    applied sets them, staging and agents' reports add to them (`services.data.add_locality`)."""

    __tablename__ = "data_sources"
    __table_args__ = (Index("ix_data_sources_source_key", "system", "type", "source_name"),)

    name: Mapped[str] = mapped_column(String(253), unique=True)
    system: Mapped[str] = mapped_column(String(253))
    type: Mapped[str] = mapped_column(String(253))
    source_name: Mapped[str] = mapped_column(String(253))  # spec.name: what claims ask for
    clusters: Mapped[list[str]] = mapped_column(JSONType, default=list)
    size_bytes: Mapped[int | None] = mapped_column(BigInteger, default=None)
    document: Mapped[dict[str, Any]] = mapped_column(JSONType)


class DataSourceClaimRow(UUIDPrimaryKey, Timestamps, Base):
    """A DataSourceClaim, bound to its job by namespace, workload kind and name (a claim may
    come before its job, or after it while it waits)."""

    __tablename__ = "data_source_claims"
    __table_args__ = (
        UniqueConstraint("namespace", "name"),
        Index("ix_data_source_claims_workload", "namespace", "workload_name", "workload_kind"),
    )

    name: Mapped[str] = mapped_column(String(253))
    namespace: Mapped[str] = mapped_column(String(63))
    system: Mapped[str] = mapped_column(String(253))
    data_source_type: Mapped[str] = mapped_column(String(253))
    data_source_name: Mapped[str] = mapped_column(String(253))
    workload_kind: Mapped[str] = mapped_column(String(16))
    workload_name: Mapped[str] = mapped_column(String(63))
    read_gbps: Mapped[float | None] = mapped_column(default=None)
    document: Mapped[dict[str, Any]] = mapped_column(JSONType)


class JobCheckpointLocation(Base):
    """The newest checkpoint a job reported with its place: the cluster it was written in
    and its size (a report replaces the previous one)."""

    __tablename__ = "job_checkpoint_locations"

    job_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True
    )
    cluster: Mapped[str | None] = mapped_column(String(63), default=None)
    size_bytes: Mapped[int | None] = mapped_column(BigInteger, default=None)
    step: Mapped[int | None] = mapped_column(BigInteger, default=None)
    reported_at: Mapped[datetime] = mapped_column(default=utcnow)
