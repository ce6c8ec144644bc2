"""node_changes: the nodes each transaction of deltas upserted in a cluster (name, domain,
capacity columns), by sequence, with the range each cluster's log covers
(clusters.node_changes_floor, clusters.node_changes_seq); the index on nodes (cluster_id, seq)
dropped and nodes' fillfactor set to 85 on Postgres. The scheduler's capacity view reads what
changed from the log, so a delta's UPDATE of a node changes no indexed column and Postgres can
update it in place (HOT: no index entries; docs/benchmarks.md, "Deltas, session 11").

The fillfactor applies to pages written from now on: a new database gets it before its first
node; an existing `nodes` table keeps its full pages until rewritten (`VACUUM FULL nodes`, which
locks the table, or pg_repack), and until then its updates move rows to other pages and are
not HOT. The log starts empty: each cluster's covers nothing below its current sequence, so the
first read of a view after the upgrade reloads the cluster whole, as a restart does anyway.

Revision ID: 0028_node_changes
Revises: 0027_node_update_type
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0028_node_changes"
down_revision: str | None = "0027_node_update_type"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "node_changes",
        sa.Column("cluster_id", sa.Uuid(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("nodes", JSON, nullable=False),
        sa.ForeignKeyConstraint(
            ["cluster_id"],
            ["clusters.id"],
            name=op.f("fk_node_changes_cluster_id_clusters"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("cluster_id", "seq", name=op.f("pk_node_changes")),
    )
    with op.batch_alter_table("clusters") as batch:
        for name in ("node_changes_floor", "node_changes_seq"):
            batch.add_column(sa.Column(name, sa.BigInteger(), nullable=False, server_default="0"))
    op.execute(
        "UPDATE clusters SET node_changes_floor = inventory_seq, node_changes_seq = inventory_seq"
    )
    with op.batch_alter_table("nodes") as batch:
        batch.drop_index("ix_nodes_cluster_id_seq")
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE nodes SET (fillfactor = 85)")  # models.NODES_FILLFACTOR


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE nodes RESET (fillfactor)")
    with op.batch_alter_table("nodes") as batch:
        batch.create_index("ix_nodes_cluster_id_seq", ["cluster_id", "seq"], unique=False)
    with op.batch_alter_table("clusters") as batch:
        batch.drop_column("node_changes_seq")
        batch.drop_column("node_changes_floor")
    op.drop_table("node_changes")
