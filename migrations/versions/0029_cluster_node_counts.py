"""clusters.nodes_total, clusters.nodes_ready: the cluster's node counts, kept by the
inventory's writes (snapshots, deltas) instead of counted by every cluster list

Revision ID: 0024_cluster_node_counts
Revises: 0023_cluster_runs_copies
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0024_cluster_node_counts"
down_revision: str | None = "0023_cluster_runs_copies"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("clusters") as batch:
        batch.add_column(sa.Column("nodes_total", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("nodes_ready", sa.Integer(), nullable=False, server_default="0"))
    # The nodes already stored, counted once.
    op.execute(
        "UPDATE clusters SET "
        "nodes_total = (SELECT count(*) FROM nodes WHERE nodes.cluster_id = clusters.id), "
        "nodes_ready = (SELECT count(*) FROM nodes WHERE nodes.cluster_id = clusters.id "
        "AND nodes.ready)"
    )


def downgrade() -> None:
    with op.batch_alter_table("clusters") as batch:
        batch.drop_column("nodes_ready")
        batch.drop_column("nodes_total")
