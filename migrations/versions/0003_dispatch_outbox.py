"""dispatch outbox and share phases

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "outbox",
        sa.Column("cluster_id", sa.Uuid(), nullable=False),
        sa.Column("placement_id", sa.Uuid(), nullable=False),
        sa.Column(
            "kind",
            sa.Enum("Assign", "Cancel", name="outboxkind", native_enum=False, length=32),
            nullable=False,
        ),
        sa.Column(
            "payload", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=False
        ),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("acked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.ForeignKeyConstraint(
            ["cluster_id"],
            ["clusters.id"],
            name=op.f("fk_outbox_cluster_id_clusters"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["placement_id"],
            ["placements.id"],
            name=op.f("fk_outbox_placement_id_placements"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_outbox")),
    )
    with op.batch_alter_table("outbox", schema=None) as batch_op:
        batch_op.create_index(
            "ix_outbox_cluster_id_acked_at", ["cluster_id", "acked_at"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_outbox_placement_id"), ["placement_id"], unique=False)
    with op.batch_alter_table("cluster_shares", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("phase", sa.String(length=16), nullable=False, server_default="Assigned")
        )
        batch_op.add_column(sa.Column("reported_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("cluster_shares", schema=None) as batch_op:
        batch_op.drop_column("reported_at")
        batch_op.drop_column("phase")
    with op.batch_alter_table("outbox", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_outbox_placement_id"))
        batch_op.drop_index("ix_outbox_cluster_id_acked_at")
    op.drop_table("outbox")
