"""a scheduling round's gap may be unknown (NULL): a round whose search proved no bound, or
that failed, is still recorded

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("scheduling_rounds", schema=None) as batch_op:
        batch_op.alter_column("gap", existing_type=sa.Double(), nullable=True)


def downgrade() -> None:
    op.execute(sa.text("UPDATE scheduling_rounds SET gap = 1.0 WHERE gap IS NULL"))
    with op.batch_alter_table("scheduling_rounds", schema=None) as batch_op:
        batch_op.alter_column("gap", existing_type=sa.Double(), nullable=False)
