"""data_copies: copies of data that belong to no share (made while a job waits: prefetch), run
by the destination cluster's agent; their link bandwidth is a link reservation with `copy_id`
(and no placement), deleted when the copy ends

Revision ID: 0022_data_copies
Revises: 0021_round_samples
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0022_data_copies"
down_revision: str | None = "0021_round_samples"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
STATE = sa.Enum(
    "Pending",
    "Copying",
    "Succeeded",
    "Failed",
    "Stopping",
    "Stopped",
    name="copystate",
    native_enum=False,
    length=16,
)


def upgrade() -> None:
    op.create_table(
        "data_copies",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("data_source", sa.String(253), nullable=False),
        sa.Column("source_cluster_id", sa.Uuid(), nullable=False),
        sa.Column("destination_cluster_id", sa.Uuid(), nullable=False),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
        sa.Column("gbps", sa.Double(), nullable=False),
        sa.Column("job_id", sa.Uuid(), nullable=True),
        sa.Column("purpose", sa.String(32), nullable=False),
        sa.Column("namespace", sa.String(63), nullable=False),
        sa.Column("item", JSON, nullable=False),
        sa.Column("state", STATE, nullable=False),
        sa.Column("staged_bytes", sa.BigInteger(), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("reported_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["source_cluster_id"],
            ["clusters.id"],
            name=op.f("fk_data_copies_source_cluster_id_clusters"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["destination_cluster_id"],
            ["clusters.id"],
            name=op.f("fk_data_copies_destination_cluster_id_clusters"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_data_copies_job_id_jobs"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_data_copies")),
    )
    op.create_index(
        "ix_data_copies_destination_cluster_id_state",
        "data_copies",
        ["destination_cluster_id", "state"],
    )
    op.create_index(op.f("ix_data_copies_job_id"), "data_copies", ["job_id"])
    op.create_index(op.f("ix_data_copies_source_cluster_id"), "data_copies", ["source_cluster_id"])
    with op.batch_alter_table("link_reservations", schema=None) as batch_op:
        batch_op.alter_column("placement_id", existing_type=sa.Uuid(), nullable=True)
        batch_op.add_column(sa.Column("copy_id", sa.Uuid(), nullable=True))
        batch_op.create_index(batch_op.f("ix_link_reservations_copy_id"), ["copy_id"])
        batch_op.create_foreign_key(
            batch_op.f("fk_link_reservations_copy_id_data_copies"),
            "data_copies",
            ["copy_id"],
            ["id"],
            ondelete="CASCADE",
        )


def downgrade() -> None:
    op.execute("DELETE FROM link_reservations WHERE placement_id IS NULL")
    with op.batch_alter_table("link_reservations", schema=None) as batch_op:
        batch_op.drop_constraint(
            batch_op.f("fk_link_reservations_copy_id_data_copies"), type_="foreignkey"
        )
        batch_op.drop_index(batch_op.f("ix_link_reservations_copy_id"))
        batch_op.drop_column("copy_id")
        batch_op.alter_column("placement_id", existing_type=sa.Uuid(), nullable=False)
    op.drop_index(op.f("ix_data_copies_source_cluster_id"), table_name="data_copies")
    op.drop_index(op.f("ix_data_copies_job_id"), table_name="data_copies")
    op.drop_index("ix_data_copies_destination_cluster_id_state", table_name="data_copies")
    op.drop_table("data_copies")
