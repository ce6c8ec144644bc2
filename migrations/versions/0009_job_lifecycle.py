"""a job's lifecycle read once at submission: running estimate, Volcano policies, maxRetry and
gang start timeout as columns (filled here for stored jobs from their manifests)

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01
"""

import re
import sys
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
# What a job without any of the fields gets (as the parser gives it).
DEFAULTS = {"estimate": 60.0, "policies": [], "retry": 3, "timeout": None}
PAGE = 1000

jobs = sa.table(
    "jobs",
    sa.column("id", sa.Uuid()),
    sa.column("manifest", JSON),
    sa.column("running_estimate_seconds", sa.Double()),
    sa.column("lifecycle_policies", JSON),
    sa.column("max_retry", sa.Integer()),
    sa.column("gang_start_timeout_seconds", sa.Integer()),
)


def upgrade() -> None:
    # Nullable, without defaults: a job stored by a replica of before this revision (both
    # serve during a rolling upgrade) is NULL here and has its document read again.
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("running_estimate_seconds", sa.Double(), nullable=True))
        batch_op.add_column(sa.Column("lifecycle_policies", JSON, nullable=True))
        batch_op.add_column(sa.Column("max_retry", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("gang_start_timeout_seconds", sa.Integer(), nullable=True))
    _fill(op.get_bind())


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("gang_start_timeout_seconds")
        batch_op.drop_column("max_retry")
        batch_op.drop_column("lifecycle_policies")
        batch_op.drop_column("running_estimate_seconds")


def _fill(conn: sa.Connection) -> None:
    """Set the columns of every stored job from its manifest, a page of jobs at a time (in id
    order: nothing held in memory but the page)."""
    update = (
        jobs.update()
        .where(jobs.c.id == sa.bindparam("job"))
        .values(
            running_estimate_seconds=sa.bindparam("estimate"),
            lifecycle_policies=sa.bindparam("policies", type_=JSON),
            max_retry=sa.bindparam("retry"),
            gang_start_timeout_seconds=sa.bindparam("timeout"),
        )
    )
    after = None
    while True:
        page = sa.select(jobs.c.id, jobs.c.manifest).order_by(jobs.c.id).limit(PAGE)
        if after is not None:
            page = page.where(jobs.c.id > after)
        rows = conn.execute(page).all()
        if not rows:
            return
        conn.execute(update, [{"job": id_, **_read(manifest)} for id_, manifest in rows])
        after = rows[-1][0]


def _read(manifest: dict[str, Any]) -> dict[str, Any]:
    """The columns as the parser derives them from a stored (so already checked) document.
    Kept here as of this revision: a migration does not import code that may change after
    it."""
    spec = manifest.get("spec") or {}
    if manifest.get("kind") == "HyperJob":
        templates = [r.get("templateSpec") or {} for r in spec.get("replicatedJobs") or []]
        estimate = next((t["runningEstimate"] for t in templates if t.get("runningEstimate")), None)
        raw_policies: object = None
    else:
        estimate, raw_policies = spec.get("runningEstimate"), spec.get("policies")
    annotations = (manifest.get("metadata") or {}).get("annotations") or {}
    timeout = annotations.get("global.volcano.sh/gang-start-timeout")
    retry = spec.get("maxRetry")
    fields = {
        "estimate": _seconds(estimate),
        "policies": _policies(raw_policies),
        "retry": retry if isinstance(retry, int) else DEFAULTS["retry"],
        "timeout": min(int(timeout), 2**31 - 1) if timeout is not None else None,
    }
    return fields


def _seconds(duration: object) -> float:
    if not isinstance(duration, str):
        return DEFAULTS["estimate"]
    scale = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
    found = re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", duration)
    total = sum(float(n) * scale[unit] for n, unit in found)
    return min(total, sys.float_info.max) or DEFAULTS["estimate"]


def _policies(raw: object) -> list[dict[str, Any]]:
    kept = []
    for policy in raw if isinstance(raw, list) else []:
        if isinstance(policy, dict) and isinstance(policy.get("action"), str):
            listed = policy.get("events") if isinstance(policy.get("events"), list) else []
            events = [e for e in [*listed, policy.get("event")] if isinstance(e, str)]
            if events:
                kept.append({"events": events, "action": policy["action"]})
    return kept
