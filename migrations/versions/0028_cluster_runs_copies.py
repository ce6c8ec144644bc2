"""clusters.runs_copies: whether the cluster's agent runs copies without a share (its last
Hello's `data_copies`; NULL: no agent said since), so a round never prefetches into a cluster
whose agent cannot run the copy

Revision ID: 0023_cluster_runs_copies
Revises: 0022_data_copies
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0023_cluster_runs_copies"
down_revision: str | None = "0022_data_copies"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("clusters") as batch:
        batch.add_column(sa.Column("runs_copies", sa.Boolean(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("clusters") as batch:
        batch.drop_column("runs_copies")
