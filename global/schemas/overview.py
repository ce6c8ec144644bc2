"""The federation at a glance, and the record of scheduling rounds."""

from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import Field

from volcano_global.schemas.common import ApiModel, GpuCapacity
from volcano_global.schemas.jobs import EventOut


class Overview(ApiModel):
    jobs: dict[str, int] = Field(description="Jobs by state (every state present).")
    clusters: dict[str, int] = Field(description="Member clusters by state.")
    gpus: list[GpuCapacity] = Field(description="GPUs by model over every cluster.")


class RoundOut(ApiModel):
    generation: int
    finished_at: datetime
    wall_seconds: float = Field(description="Snapshot, solve and commit.")
    solve_seconds: float
    status: str = Field(description="Solver status: OPTIMAL, FEASIBLE, GREEDY, ...")
    gap: float | None = Field(
        description="Relative gap to the solver's bound (0: proven optimal; null: no bound "
        "was proven in time, or the round failed)."
    )
    placed: int
    pending: int
    policy: str


class RoundList(ApiModel):
    items: list[RoundOut]


class AuditRecord(EventOut):
    """One call in the audit trail: `message` says who (the token's name), what and, when
    refused, why; the token's id and the client's address say which token and from where."""

    token_id: uuid.UUID | None = Field(
        None, description="The token that called; none: the admin token of the settings."
    )
    client_address: str | None = Field(
        None,
        description="The socket peer (or, behind a proxy listed in audit.trustedProxies, the "
        "client it forwarded for).",
    )


class AuditList(ApiModel):
    items: list[AuditRecord]
