"""link reservations of a share's staging: `staging_share_id` names the share whose copy the
bandwidth is for (null: the placement's own, for its whole life, as before); the row is deleted
when that share's staging ends, so a link's reserved sum counts a copy only while it runs

Revision ID: 0019_staging_links
Revises: 0018_preemptable
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019_staging_links"
down_revision: str | None = "0018_preemptable"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("link_reservations", schema=None) as batch_op:
        batch_op.add_column(sa.Column("staging_share_id", sa.Uuid(), nullable=True))
        batch_op.create_index(
            batch_op.f("ix_link_reservations_staging_share_id"), ["staging_share_id"]
        )
        batch_op.create_foreign_key(
            batch_op.f("fk_link_reservations_staging_share_id_cluster_shares"),
            "cluster_shares",
            ["staging_share_id"],
            ["id"],
            ondelete="CASCADE",
        )


def downgrade() -> None:
    with op.batch_alter_table("link_reservations", schema=None) as batch_op:
        batch_op.drop_constraint(
            batch_op.f("fk_link_reservations_staging_share_id_cluster_shares"),
            type_="foreignkey",
        )
        batch_op.drop_index(batch_op.f("ix_link_reservations_staging_share_id"))
        batch_op.drop_column("staging_share_id")
