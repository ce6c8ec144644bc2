"""data as inventory and jobs' data needs: Volcano Global's DataSources and DataSourceClaims as
tables (documents kept as written, the fields the Global reads beside them), and the newest
checkpoint of each job with the cluster it was written in and its size

Revision ID: 0018_data
Revises: 0017_hour3
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0018_data"
down_revision: str | None = "0018_staging"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def _timestamps() -> list[sa.Column]:
    return [
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    ]


def upgrade() -> None:
    op.create_table(
        "data_sources",
        sa.Column("name", sa.String(253), nullable=False),
        sa.Column("system", sa.String(253), nullable=False),
        sa.Column("type", sa.String(253), nullable=False),
        sa.Column("source_name", sa.String(253), nullable=False),
        sa.Column("clusters", JSON, nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=True),
        sa.Column("document", JSON, nullable=False),
        *_timestamps(),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_data_sources")),
        sa.UniqueConstraint("name", name=op.f("uq_data_sources_name")),
    )
    op.create_index("ix_data_sources_source_key", "data_sources", ["system", "type", "source_name"])
    op.create_table(
        "data_source_claims",
        sa.Column("name", sa.String(253), nullable=False),
        sa.Column("namespace", sa.String(63), nullable=False),
        sa.Column("system", sa.String(253), nullable=False),
        sa.Column("data_source_type", sa.String(253), nullable=False),
        sa.Column("data_source_name", sa.String(253), nullable=False),
        sa.Column("workload_kind", sa.String(16), nullable=False),
        sa.Column("workload_name", sa.String(63), nullable=False),
        sa.Column("read_gbps", sa.Double(), nullable=True),
        sa.Column("document", JSON, nullable=False),
        *_timestamps(),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_data_source_claims")),
        sa.UniqueConstraint("namespace", "name", name=op.f("uq_data_source_claims_namespace_name")),
    )
    op.create_index(
        "ix_data_source_claims_workload",
        "data_source_claims",
        ["namespace", "workload_name", "workload_kind"],
    )
    op.create_table(
        "job_checkpoint_locations",
        sa.Column("job_id", sa.Uuid(), nullable=False),
        sa.Column("cluster", sa.String(63), nullable=True),
        sa.Column("size_bytes", sa.BigInteger(), nullable=True),
        sa.Column("step", sa.BigInteger(), nullable=True),
        sa.Column("reported_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["jobs.id"],
            name=op.f("fk_job_checkpoint_locations_job_id_jobs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("job_id", name=op.f("pk_job_checkpoint_locations")),
    )


def downgrade() -> None:
    op.drop_table("job_checkpoint_locations")
    op.drop_index("ix_data_source_claims_workload", table_name="data_source_claims")
    op.drop_table("data_source_claims")
    op.drop_index("ix_data_sources_source_key", table_name="data_sources")
    op.drop_table("data_sources")
