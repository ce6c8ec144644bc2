"""What a round's answer is worth: the primary objective the CP-SAT model maximises
(`cpsat_model`), the same numbers by which its answer is compared with its warm start, and what
`Decision.objective` reports. Pure arithmetic on the window in queue order."""

from __future__ import annotations

from volcano_global.solver.model import JobRequest
from volcano_global.solver.reservations import Hold, Owed

MAX_DUE = 4  # jobs owed a reservation that are weighted lexicographically
# The objective's coefficients stay far from 64 bits at any window: the order value is the
# place in the window in RANKS steps, and priority levels above the fourth are merged.
RANKS = 32
MAX_LEVEL = 3


def job_values(jobs: list[JobRequest], factor: int) -> tuple[dict[str, int], dict[str, int]]:
    """What admitting each job is worth, and its value by order alone: factor^level x
    ceil(RANKS (N - position) / N) for the N jobs of the window in queue order (priority level
    0 the lowest, levels above MAX_LEVEL merged), so that earlier jobs weigh more and two later
    ones may outweigh one earlier; a job owed a reservation (`due`, the first MAX_DUE of them)
    outweighs every job not owed one, and each such job every one after it."""
    levels = {p: min(i, MAX_LEVEL) for i, p in enumerate(sorted({j.priority for j in jobs}))}
    n = len(jobs)
    normal = {
        j.id: factor ** levels[j.priority] * -(-RANKS * (n - i) // n) for i, j in enumerate(jobs)
    }
    values = dict(normal)
    due = [j for j in jobs if j.due][:MAX_DUE]
    # Above every job's order value, so that even a due job's reservation (its weight less at
    # most its order value) outweighs every job after it.
    floor = sum(normal.values()) + 1
    for k, job in enumerate(due):
        values[job.id] = floor * 2 ** (len(due) - 1 - k) + normal[job.id]
    return values, normal


def reservation_value(
    entry: Owed, hold: Hold, weights: dict[str, int], normal: dict[str, int]
) -> int:
    """A reservation is worth as much as starting now, less the job's order value for the
    wait, in proportion to its start over the latest option's."""
    latest = max(h.start_in_s for h in entry.options) or 1.0
    return weights[entry.job.id] - round(normal[entry.job.id] * hold.start_in_s / latest)


def width_value(job: JobRequest, units: int, normal: dict[str, int]) -> int:
    """An elastic job's width: each unit is worth its order value over its units, so the whole
    width is worth about one more job of its place in the queue (0 for a rigid job)."""
    return max(normal[job.id] // job.units, 1) * units if job.elastic else 0


def score(  # type: ignore[no-untyped-def]
    jobs: list[JobRequest],
    decisions,
    held: list[Hold],
    owed: list[Owed],
    weights: dict[str, int],
    normal: dict[str, int],
) -> int:
    """The model's primary objective for an answer (jobs started, their width, reservations):
    what the warm start and the search's answer are compared by."""
    by_id = {j.id: j for j in jobs}
    total = 0
    for d in decisions:
        if d.admitted:
            units = sum(s.units for s in d.shares)
            total += weights[d.job_id] + width_value(by_id[d.job_id], units, normal)
    options = {e.job.id: e for e in owed}
    for hold in held:
        entry = options.get(hold.job_id)
        if entry is not None:
            total += reservation_value(entry, hold, weights, normal)
    return total
