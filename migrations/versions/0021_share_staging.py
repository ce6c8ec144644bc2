"""a share may stage its data before it starts: the copies it waits for (`staging`, as the
assignment carries them) and when they ended (`staged_at`, from which the gang's start timeout
counts)

Revision ID: 0018_staging
Revises: 0017_hour3
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0018_staging"
down_revision: str | None = "0017_hour3"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("cluster_shares", schema=None) as batch_op:
        batch_op.add_column(sa.Column("staging", JSON, nullable=True))
        batch_op.add_column(sa.Column("staged_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("cluster_shares", schema=None) as batch_op:
        batch_op.drop_column("staged_at")
        batch_op.drop_column("staging")
