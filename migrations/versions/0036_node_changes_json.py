"""node_changes.nodes as json, compressed with lz4 where the server has it, on Postgres.

The log's rows are written once, read whole by the scheduler and never queried inside: JSONB's
parsed form bought nothing and cost its parse and, with pglz, a slow compression, for about the
same size (docs/benchmarks.md, "Deltas, session 16"). A server built without lz4 keeps pglz.
SQLite: unchanged (its JSON is text).

Revision ID: 0031_node_changes_json
Revises: 0030_share_gpu_model
Create Date: 2026-12-06
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0031_node_changes_json"
down_revision: str | None = "0030_share_gpu_model"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_LZ4 = """
DO $$
BEGIN
    ALTER TABLE node_changes ALTER COLUMN nodes SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
    NULL;  -- built without lz4: pglz, the default
END $$
"""


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("ALTER TABLE node_changes ALTER COLUMN nodes TYPE json USING nodes::json")
    op.execute(_LZ4)


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("ALTER TABLE node_changes ALTER COLUMN nodes SET COMPRESSION default")
    op.execute("ALTER TABLE node_changes ALTER COLUMN nodes TYPE jsonb USING nodes::jsonb")
