"""a job's training processes report their checkpoints: when the newest was saved, so that
preemption counts the work an eviction loses from it

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-03
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("checkpointed_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("checkpoint_step", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("checkpoint_step")
        batch_op.drop_column("checkpointed_at")
