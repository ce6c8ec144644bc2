"""round_samples: the federation's allocation, waiting jobs and waits as the scheduling loop
saw them, one row at most every 30 s, kept 7 days (the console's history view)

Revision ID: 0021_round_samples
Revises: 0020_attained_service
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021_round_samples"
down_revision: str | None = "0020_attained_service"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "round_samples",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("taken_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("gpus_total", sa.Integer(), nullable=False),
        sa.Column("gpus_allocated", sa.Integer(), nullable=False),
        sa.Column("waiting_jobs", sa.Integer(), nullable=False),
        sa.Column("waiting_gpus", sa.Integer(), nullable=False),
        sa.Column("median_wait_seconds", sa.Double(), nullable=False),
        sa.Column("oldest_wait_seconds", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_round_samples")),
    )
    op.create_index(op.f("ix_round_samples_taken_at"), "round_samples", ["taken_at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_round_samples_taken_at"), table_name="round_samples")
    op.drop_table("round_samples")
