"""The federation at a glance, and the record of scheduling rounds."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from volcano_global.schemas.common import ApiModel, GpuCapacity


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
