"""The sane range of every quantity the Global accepts, in one place.

A value outside its range is refused where it enters (the job parser, the request schemas, the
agent stream), with the field named, so that nothing downstream - CP-SAT's 64-bit model,
SQLite's and Postgres's integers, datetime arithmetic - ever sees it. The ranges are far above
any real cluster and far below what breaks: 20,000 nodes of the largest node still sum well
inside 64 bits, and a job of the most pods at the most GPUs per pod inside 32. The README's
limits table lists them (a test keeps the two in step)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import AfterValidator, AwareDatetime, Field


@dataclass(frozen=True)
class Bound:
    """`name` as the README's limits table shows it; `low` and `high` inclusive."""

    name: str
    low: float
    high: float
    unit: str

    def check(self, value: float) -> str | None:
        """Why `value` is out of range, or None."""
        if not math.isfinite(value):
            return f"must be a finite number in [{self.text}]"
        if value < self.low or value > self.high:
            return f"must be in [{self.text}] {self.unit}, got {value:g}"
        return None

    @property
    def text(self) -> str:
        return f"{self.low:g}, {self.high:g}"

    def describe(self) -> str:
        """The range as the README's limits table shows it."""
        return f"{_number(self.low)} to {_number(self.high)} {self.unit}".strip()

    def field(self, *, strict_low: bool = False) -> Any:
        """The pydantic constraint (finite, in range)."""
        low = {"gt": self.low} if strict_low else {"ge": self.low}
        return Field(le=self.high, allow_inf_nan=False, **low)


def _number(value: float) -> str:
    if value == int(value) and value < 1e16:
        return f"{int(value):,}" if value >= 10_000 else str(int(value))
    return f"{value:g}"


GPUS_PER_POD = Bound("GPUs per pod (and per node)", 0, 1024, "devices")
CPU_MILLIS = Bound("CPU per pod or node", 0, 2**30, "millicores")  # ~1M cores
MEMORY_BYTES = Bound("memory per pod or node", 0, 2**46, "bytes")  # 64 TiB
DURATION_S = Bound("durations (runningEstimate, gang start timeout)", 0, 366 * 86_400, "s")
STEP_TIME_S = Bound("step times", 0, 86_400, "s")
BANDWIDTH_GBPS = Bound("bandwidth (links, crossing, measured)", 0, 1_000_000, "Gbps")
MODEL_PARAMETERS = Bound("model parameters", 0, 1e15, "parameters")
BYTES_PER_PARAMETER = Bound("gradient bytes per parameter", 0, 64, "bytes")
BYTES_PER_STEP = Bound("bytes exchanged per step", 0, 1e18, "bytes")
PARALLEL_DEGREE = Bound("parallel degrees (TP, PP, CP, EP, DP)", 1, 2**20, "")
TRAINING_STEP = Bound("training steps (a checkpoint's)", 0, 1e15, "")
# Kubernetes' quantities hold about 9.2e18 of their unit (jobspec/quantity.py's LARGEST).
DATA_BYTES = Bound("data sizes (datasets, checkpoints)", 0, 1e19, "bytes")
EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
LATEST = datetime(2200, 1, 1, tzinfo=UTC)
TIMESTAMPS = Bound("timestamps", EARLIEST.year, LATEST.year, "(years, UTC; a zone is required)")

ALL = (
    GPUS_PER_POD,
    CPU_MILLIS,
    MEMORY_BYTES,
    DURATION_S,
    STEP_TIME_S,
    BANDWIDTH_GBPS,
    MODEL_PARAMETERS,
    BYTES_PER_PARAMETER,
    BYTES_PER_STEP,
    PARALLEL_DEGREE,
    TRAINING_STEP,
    DATA_BYTES,
    TIMESTAMPS,
)


def in_time(value: datetime) -> datetime:
    """A time with a zone, as UTC, between EARLIEST and LATEST (ValueError otherwise)."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("must have a time zone (such as Z or +02:00)")
    try:
        utc = value.astimezone(UTC)
    except OverflowError:
        raise ValueError("is outside the range of times") from None
    if not EARLIEST <= utc < LATEST:
        raise ValueError(
            f"must be between {EARLIEST.isoformat()} and {LATEST.isoformat()}, got {value}"
        )
    return utc


Timestamp = Annotated[AwareDatetime, AfterValidator(in_time)]
