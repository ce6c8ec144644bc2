"""GPU model names: jobs stored under GPU Feature Discovery's product names take the short name
the Global now matches by (`volcano_global.jobspec.gpu_models`), so a job that waited for
`NVIDIA-H100-80GB-HBM3` still matches the nodes, which agents now report as `H100`. Nodes need
nothing: every agent sends its whole inventory when it reconnects to the upgraded Global.

Revision ID: 0017_hour3
Revises: 0017_fairness
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from volcano_global.jobspec.gpu_models import canonical_model

revision: str = "0017_hour3"
down_revision: str | None = "0017_fairness"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    bind = op.get_bind()
    jobs = sa.table("jobs", sa.column("gpu_model", sa.String))
    stored = bind.execute(sa.select(jobs.c.gpu_model).distinct()).scalars().all()
    for name in stored:
        if name and canonical_model(name) != name:
            bind.execute(
                jobs.update()
                .where(jobs.c.gpu_model == name)
                .values(gpu_model=canonical_model(name))
            )


def downgrade() -> None:
    """The product names are not kept: a downgraded Global matches the short names exactly."""
