"""a preemptor's placement is nominated until its victims are gone: the victims' placements
it waits for

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-03
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("placements", schema=None) as batch_op:
        batch_op.add_column(sa.Column("awaits", JSON, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("placements", schema=None) as batch_op:
        batch_op.drop_column("awaits")
