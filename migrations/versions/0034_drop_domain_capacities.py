"""domain_gpu_capacities dropped: the GPUs by model under each topology domain were kept by every
snapshot and delta (about 380 upserted rows a 500-node delta at 5,000 nodes a cluster) for one
reader, the console's topology view, which now sums them from the cluster's nodes in the query
that counts them (`services/inventory/fleet_views._node_sums`; docs/benchmarks.md, "Deltas,
session 12"). The per-cluster aggregates (cluster_gpu_capacities) stay.

A downgrade recreates the table and fills it from the nodes stored then (each node's GPUs
added to its domain and every domain above it), as the release before kept it.

Revision ID: 0029_drop_domain_capacities
Revises: 0028_node_changes
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0029_drop_domain_capacities"
down_revision: str | None = "0028_node_changes"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.drop_table("domain_gpu_capacities")


# Each node with GPUs paired with its domain and each domain above it, summed per domain and
# model as `snapshots.contribution` counts a node (free only on a ready, schedulable node).
_REFILL = """
INSERT INTO domain_gpu_capacities (domain_id, gpu_model, total_gpus, free_gpus)
WITH RECURSIVE up (node_id, domain_id) AS (
    SELECT id, domain_id FROM nodes WHERE domain_id IS NOT NULL AND gpu_allocatable > 0
    UNION ALL
    SELECT up.node_id, d.parent_id FROM up JOIN topology_domains d ON d.id = up.domain_id
    WHERE d.parent_id IS NOT NULL
)
SELECT up.domain_id, COALESCE(NULLIF(n.gpu_model, ''), 'unknown'), SUM(n.gpu_allocatable),
       SUM(CASE WHEN n.ready AND n.schedulable AND n.gpu_allocatable > n.gpu_used
                THEN n.gpu_allocatable - n.gpu_used ELSE 0 END)
FROM up JOIN nodes n ON n.id = up.node_id
GROUP BY up.domain_id, COALESCE(NULLIF(n.gpu_model, ''), 'unknown')
"""


def downgrade() -> None:
    op.create_table(
        "domain_gpu_capacities",
        sa.Column("domain_id", sa.Uuid(), nullable=False),
        sa.Column("gpu_model", sa.String(length=128), nullable=False),
        sa.Column("total_gpus", sa.Integer(), nullable=False),
        sa.Column("free_gpus", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["domain_id"],
            ["topology_domains.id"],
            name=op.f("fk_domain_gpu_capacities_domain_id_topology_domains"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("domain_id", "gpu_model", name=op.f("pk_domain_gpu_capacities")),
    )
    op.execute(_REFILL)
