"""cluster_shares.gpu_model: the GPU model a share's pods run on, as dispatched (the job's, or
for a HyperJob whose children differ the one its children ask for), so that the books take a
share's GPUs from its own model's leaves: a parted job names no model of its own, and in a
cluster of two models whose leaves share a name its share was credited to the other model's.

Additive: a nullable column, nothing filled. A share written before (NULL) reads as its job's
model, as every release before read it (`services/scheduling/books.py`).

Revision ID: 0030_share_gpu_model
Revises: 0029_drop_domain_capacities
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0030_share_gpu_model"
down_revision: str | None = "0029_drop_domain_capacities"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("cluster_shares") as batch:
        batch.add_column(sa.Column("gpu_model", sa.String(length=128), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("cluster_shares") as batch:
        batch.drop_column("gpu_model")
