"""scheduling rounds record

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "scheduling_rounds",
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("wall_seconds", sa.Double(), nullable=False),
        sa.Column("solve_seconds", sa.Double(), nullable=False),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("gap", sa.Double(), nullable=False),
        sa.Column("placed", sa.Integer(), nullable=False),
        sa.Column("pending", sa.Integer(), nullable=False),
        sa.Column("policy", sa.String(length=32), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_scheduling_rounds")),
    )
    with op.batch_alter_table("scheduling_rounds", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_scheduling_rounds_finished_at"), ["finished_at"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("scheduling_rounds", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_scheduling_rounds_finished_at"))
    op.drop_table("scheduling_rounds")
