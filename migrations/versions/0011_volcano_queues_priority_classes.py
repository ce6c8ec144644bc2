"""queues keep their Volcano Queue document (spec, labels, annotations, state, parent and what
the scheduler reads of it); priority classes become a table; a job keeps its class's
preemptionPolicy

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("queues", schema=None) as batch_op:
        batch_op.add_column(sa.Column("spec", JSON, nullable=True))
        batch_op.add_column(sa.Column("labels", JSON, nullable=True))
        batch_op.add_column(sa.Column("annotations", JSON, nullable=True))
        batch_op.add_column(
            sa.Column("state", sa.String(16), nullable=False, server_default="Open")
        )
        batch_op.add_column(sa.Column("parent", sa.String(63), nullable=True))
        batch_op.add_column(sa.Column("deserved_gpus", sa.Integer(), nullable=True))
        batch_op.add_column(
            sa.Column("guarantee_gpus", sa.Integer(), nullable=False, server_default="0")
        )
        batch_op.add_column(
            sa.Column("reclaimable", sa.Boolean(), nullable=False, server_default=sa.true())
        )
        batch_op.create_index(batch_op.f("ix_queues_parent"), ["parent"], unique=False)
    # A queue made before: its spec says what its columns said (the GPU quota as a capability).
    queues = sa.table(
        "queues",
        sa.column("id", sa.Uuid()),
        sa.column("weight", sa.Integer()),
        sa.column("gpu_quota", sa.Integer()),
        sa.column("priority", sa.Integer()),
        sa.column("spec", JSON),
        sa.column("labels", JSON),
        sa.column("annotations", JSON),
    )
    bind = op.get_bind()
    for row in bind.execute(
        sa.select(queues.c.id, queues.c.weight, queues.c.gpu_quota, queues.c.priority)
    ).all():
        spec: dict[str, object] = {"weight": row.weight, "reclaimable": True}
        if row.gpu_quota is not None:
            spec["capability"] = {"nvidia.com/gpu": row.gpu_quota}
        if row.priority and row.priority > 0:  # the CRD's minimum is 0
            spec["priority"] = row.priority
        bind.execute(
            queues.update()
            .where(queues.c.id == row.id)
            .values(spec=spec, labels={}, annotations={})
        )
    with op.batch_alter_table("queues", schema=None) as batch_op:
        for column in ("spec", "labels", "annotations"):
            batch_op.alter_column(column, existing_type=JSON, nullable=False)
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("preemption_policy", sa.String(32), nullable=True))
    op.create_table(
        "priority_classes",
        sa.Column("name", sa.String(253), nullable=False),
        sa.Column("value", sa.Integer(), nullable=False),
        sa.Column("preemption_policy", sa.String(32), nullable=False),
        sa.Column("global_default", sa.Boolean(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_priority_classes")),
        sa.UniqueConstraint("name", name=op.f("uq_priority_classes_name")),
    )
    op.create_index(
        "ix_priority_classes_one_global_default",
        "priority_classes",
        ["global_default"],
        unique=True,
        sqlite_where=sa.text("global_default"),
        postgresql_where=sa.text("global_default"),
    )


def downgrade() -> None:
    op.drop_index("ix_priority_classes_one_global_default", table_name="priority_classes")
    op.drop_table("priority_classes")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("preemption_policy")
    with op.batch_alter_table("queues", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_queues_parent"))
        for column in (
            "reclaimable",
            "guarantee_gpus",
            "deserved_gpus",
            "parent",
            "state",
            "annotations",
            "labels",
            "spec",
        ):
            batch_op.drop_column(column)
