"""priority classes keep their labels and annotations (kubectl's last-applied annotation
among them), as the Kubernetes-compatible API serves them

Revision ID: 0014
Revises: 0012 (the lead re-chains it after 0013)
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0014"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("priority_classes", schema=None) as batch_op:
        batch_op.add_column(sa.Column("labels", JSON, nullable=True))
        batch_op.add_column(sa.Column("annotations", JSON, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("priority_classes", schema=None) as batch_op:
        batch_op.drop_column("annotations")
        batch_op.drop_column("labels")
