"""node_changes.node_count and clusters.node_changes_nodes: the node change log is pruned by
the nodes it holds, not by a window of sequences (`services/inventory/node_changes.py`). A
busy cluster's agent sends many small deltas a second, which a window of 16-32 sequences
covered for less than a round's period.

Existing rows are counted here. A replica of an older release still prunes by sequences,
writes rows counted 0 and leaves the cluster's count as it was: until every replica runs this
release, the log may be pruned earlier or later than the new rule says (never read wrong).

Revision ID: 0033_node_changes_count
Revises: 0032_node_usage_type
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0033_node_changes_count"
down_revision: str | None = "0032_node_usage_type"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("node_changes") as batch:
        batch.add_column(sa.Column("node_count", sa.Integer(), nullable=False, server_default="0"))
    with op.batch_alter_table("clusters") as batch:
        batch.add_column(
            sa.Column("node_changes_nodes", sa.Integer(), nullable=False, server_default="0")
        )
    op.execute("UPDATE node_changes SET node_count = json_array_length(nodes)")
    op.execute(
        "UPDATE clusters SET node_changes_nodes = (SELECT coalesce(sum(c.node_count), 0) "
        "FROM node_changes AS c WHERE c.cluster_id = clusters.id)"
    )


def downgrade() -> None:
    with op.batch_alter_table("clusters") as batch:
        batch.drop_column("node_changes_nodes")
    with op.batch_alter_table("node_changes") as batch:
        batch.drop_column("node_count")
