"""one agent stream per cluster: the epoch of the stream that holds the cluster

Revision ID: 0017_streamsec
Revises: 0016
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017_streamsec"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("clusters", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("agent_stream_epoch", sa.BigInteger(), nullable=False, server_default="0")
        )


def downgrade() -> None:
    with op.batch_alter_table("clusters", schema=None) as batch_op:
        batch_op.drop_column("agent_stream_epoch")
