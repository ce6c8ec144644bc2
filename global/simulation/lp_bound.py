"""A time-indexed LP lower bound on the average JCT of a trace on a fleet, non-preemptive.

No schedule that runs every job whole, from start to end at full speed, on at most the fleet's
GPUs at any instant (`comparison.bounds` names the simpler bounds) can beat it. It shows the
headroom over a policy: bound / first-fit's average JCT is the best possible ratio to it.

The model, slots of length D over [0, H) and a last slot K = H / D for "starts at H or later":

    y[j, k] in [0, 1]   the share of job j started in slot k or before (k >= floor(a_j / D))
    y[j, k - 1] <= y[j, k],  y[j, K] = 1
    for each instant t * D, t = 1..K-1:
        sum_j g_j * (y[j, t - 1] - y[j, t - c_j]) <= C,  c_j = ceil(p_j / D)
    minimise the mean over jobs of sum_k (y[j, k] - y[j, k - 1]) * (max(k * D, a_j) + p_j - a_j)

with a_j, p_j, g_j job j's arrival, full-speed duration and GPUs, C the fleet's GPUs.

Why any real schedule's average JCT is at least the LP's optimum: map a schedule that starts
job j at S_j >= a_j to y[j, k] = 1 for k >= k_j = min(floor(S_j / D), K), else 0. Its cost
max(k_j * D, a_j) + p_j - a_j is at most S_j + p_j - a_j (starts rounded down to the slot, or
to H). At an instant t * D < H the job is counted only for t in k_j + 1 .. k_j + c_j - 1, and
it does run then: S_j < (k_j + 1) * D <= t * D and t * D <= (k_j + c_j - 1) * D < S_j + p_j
(durations, in effect, rounded down by up to a slot). So the jobs counted at an instant run
together at it and hold at most C GPUs, the mapped point is feasible, and the LP's minimum is
at most the schedule's average. Instants at or after H are not constrained (a relaxation), so
any H is valid; H is the makespan of a list schedule so that few jobs start after it (`late`).

What it leaves out, each only loosening it: clusters (a job that cannot split must fit in one),
links, the speed model (a split may run slower), rounds, and integrality (a fraction of a job
may start in each slot). It does not bound a policy that preempts.
"""

from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass

from ortools.linear_solver import pywraplp

from volcano_global.simulation.comparison import is_large
from volcano_global.simulation.engine import SimResult
from volcano_global.simulation.workload import TraceJob

MAX_SLOTS = 600  # slot length H / 600 (at least MIN_SLOT_S): 300 jobs solve in seconds
MIN_SLOT_S = 1.0
TIME_LIMIT_S = 60.0
# The fastest of OR-Tools' LP solvers on these models (timings: docs/simulation.md).
SOLVER = "CLP"


@dataclass(frozen=True)
class LpBound:
    avg_jct_s: float  # the bound (nan if the LP did not solve to optimality)
    status: str  # the LP solver's result status, "OPTIMAL" when the bound holds
    slot_s: float
    slots: int
    horizon_s: float
    late: float  # jobs' mass in the last slot (starting at the horizon or later)
    seconds: float  # to build and solve


def lp_bound(
    jobs: list[TraceJob],
    capacity_gpus: int,
    *,
    max_slots: int = MAX_SLOTS,
    slot_s: float | None = None,
    time_limit_s: float = TIME_LIMIT_S,
    solver: str = SOLVER,
) -> LpBound:
    """The bound over `jobs` on `capacity_gpus` GPUs; `slot_s` overrides the slot length
    (otherwise the list schedule's makespan over `max_slots`, at least MIN_SLOT_S)."""
    started = time.monotonic()
    if capacity_gpus <= 0:
        raise ValueError(f"capacity_gpus: must be positive, got {capacity_gpus}")
    for job in jobs:
        if job.gpus > capacity_gpus:
            raise ValueError(
                f"jobs: {job.id} asks for {job.gpus} GPUs, the fleet has {capacity_gpus}"
            )
    if not jobs:
        return LpBound(math.nan, "NO_JOBS", 0.0, 0, 0.0, 0.0, 0.0)
    horizon = list_schedule_makespan(jobs, capacity_gpus)
    slot = slot_s or max(horizon / max_slots, MIN_SLOT_S)
    slots = max(math.ceil(horizon / slot), 1)
    model = _Model(jobs, capacity_gpus, slot, slots, solver)
    status, value, late = model.solve(time_limit_s)
    return LpBound(
        avg_jct_s=value,
        status=status,
        slot_s=slot,
        slots=slots,
        horizon_s=slots * slot,
        late=late,
        seconds=time.monotonic() - started,
    )


def lp_bound_of(result: SimResult, *, large: bool = False) -> LpBound:
    """Over the jobs `comparison.judge` judges (any policy's result of the trace); `large`:
    its large gangs alone (the other jobs only take capacity from them)."""
    jobs = [r.job for r in result.records if r.job.id not in result.never_placeable]
    if large:
        jobs = [j for j in jobs if is_large(result, j)]
    return lp_bound(jobs, result.capacity_gpus)


def list_schedule_makespan(jobs: list[TraceJob], capacity_gpus: int) -> float:
    """The last end of first-come-first-served on one pool of `capacity_gpus` GPUs (a job
    starts once it has arrived, the one before it has started, and its GPUs are free)."""
    running: list[tuple[float, int]] = []  # (end, GPUs)
    free, now, last = capacity_gpus, 0.0, 0.0
    for job in sorted(jobs, key=lambda j: (j.arrival_s, j.id)):
        now = max(now, job.arrival_s)
        while running and (running[0][0] <= now or free < job.gpus):
            end, gpus = heapq.heappop(running)
            now, free = max(now, end), free + gpus
        heapq.heappush(running, (now + job.duration_s, job.gpus))
        free -= job.gpus
        last = max(last, now + job.duration_s)
    return last


class _Model:
    """The LP of the module docstring, in one of OR-Tools' LP solvers."""

    def __init__(
        self, jobs: list[TraceJob], capacity_gpus: int, slot: float, slots: int, solver: str
    ) -> None:
        self.jobs, self.slot, self.slots = jobs, slot, slots
        created = pywraplp.Solver.CreateSolver(solver)
        if created is None:
            raise ValueError(f"solver: {solver!r} is not an LP solver of this OR-Tools build")
        self.solver = created
        self.y: list[dict[int, pywraplp.Variable]] = [self._starts(j) for j in jobs]
        self._capacity(capacity_gpus)
        self._objective()

    def first_slot(self, job: TraceJob) -> int:
        return min(math.floor(job.arrival_s / self.slot), self.slots)

    def cost(self, job: TraceJob, k: int) -> float:
        return max(k * self.slot, job.arrival_s) + job.duration_s - job.arrival_s

    def _starts(self, job: TraceJob) -> dict[int, pywraplp.Variable]:
        """y[j, k] for k in first_slot .. K - 1, nondecreasing (y[j, K] = 1 is implied)."""
        y: dict[int, pywraplp.Variable] = {}
        for k in range(self.first_slot(job), self.slots):
            y[k] = self.solver.NumVar(0.0, 1.0, "")
            if k - 1 in y:
                self.solver.Add(y[k - 1] <= y[k])
        return y

    def _capacity(self, capacity_gpus: int) -> None:
        rows = [self.solver.Constraint(-math.inf, capacity_gpus) for _ in range(self.slots)]
        for job, y in zip(self.jobs, self.y, strict=True):
            counted = math.ceil(job.duration_s / self.slot) - 1  # instants it surely runs at
            if counted <= 0 or job.gpus <= 0:
                continue
            for k, var in y.items():
                # y[j, k] enters instant k + 1 (+g) and leaves at instant k + 1 + counted (-g).
                if k + 1 < self.slots:
                    rows[k + 1].SetCoefficient(var, job.gpus)
                if k + 1 + counted < self.slots:
                    rows[k + 1 + counted].SetCoefficient(var, -job.gpus)

    def _objective(self) -> None:
        """sum_k (y_k - y_{k-1}) cost_k = cost_K - sum_k y_k (cost_{k+1} - cost_k)."""
        objective = self.solver.Objective()
        self.constant = 0.0
        for job, y in zip(self.jobs, self.y, strict=True):
            self.constant += self.cost(job, self.slots)
            for k, var in y.items():
                objective.SetCoefficient(var, -(self.cost(job, k + 1) - self.cost(job, k)))
        objective.SetMinimization()

    def solve(self, time_limit_s: float) -> tuple[str, float, float]:
        """(status, the bound, jobs' mass starting at the horizon or later)."""
        self.solver.SetTimeLimit(int(time_limit_s * 1000))
        status = self.solver.Solve()
        name = {pywraplp.Solver.OPTIMAL: "OPTIMAL"}.get(status, f"NOT_OPTIMAL({status})")
        if status != pywraplp.Solver.OPTIMAL:
            return name, math.nan, math.nan
        n = len(self.jobs)
        value = (self.solver.Objective().Value() + self.constant) / n
        late = sum(1.0 - (y[self.slots - 1].solution_value() if y else 0.0) for y in self.y)
        return name, value, late
