"""What a simulation is run with (`SimOptions`): the round's limits, preemption, checkpoints,
elastic hysteresis, data staging, long work and time-sharing."""

from __future__ import annotations

from dataclasses import dataclass, field

from volcano_global.solver import SolveOptions, planning
from volcano_global.solver.gravity import DataOptions
from volcano_global.solver.long_work import LongWork
from volcano_global.solver.preemption import Rules
from volcano_global.solver.replication import READS_WINDOW_S
from volcano_global.solver.timesharing import TimeSharing


@dataclass(frozen=True)
class SimOptions:
    window: int = 100
    # Every waiting job considered (`solver.whole_queue`): beyond the window, whole-job
    # backfill; False: only the window (the simulator's rounds before issue 35 item 2).
    whole_queue: bool = True
    backfill_limit: int = 1000
    deterministic_time: float = 0.5  # CP-SAT work per round (deterministic units)
    time_limit_s: float = 30.0  # a wall-clock safety net only
    reserve_after_s: float = planning.RESERVE_AFTER_S
    max_holds: int = SolveOptions.max_holds
    # Preemption and reclaim (`solver.preemption`): None runs without them. `checkpoint_s`:
    # an evicted job resumes from its last checkpoint (every so many seconds of its run);
    # None: it loses everything since its start.
    preemption: Rules | None = None
    checkpoint_s: float | None = None
    # Elastic width: when a resize is worth it, and what each one costs (`elastic.restart`).
    hysteresis: planning.Hysteresis = field(default_factory=planning.Hysteresis)
    resize_restart_s: float = 300.0
    # Where jobs may start given their data, and how fast staging copies (`solver.gravity`).
    data: DataOptions = field(default_factory=DataOptions)
    # What a round counts as read lately (`DataOptions.replicate_readers`): the jobs that
    # read each dataset submitted within this many seconds.
    reads_window_s: float = READS_WINDOW_S
    # Long jobs (by runningEstimate) held back while long work holds its share (`long_work`).
    long_work: LongWork | None = None
    # Time-sharing's limits, for the scenario's queues that opt in (`timeSharing: true`).
    time_sharing: TimeSharing = field(default_factory=TimeSharing)
