"""The simulator's copies (issue 33): a start's staging, which it waits for holding its GPUs
(as a share waits in Staging on a member cluster), and the copies fetched for waiting jobs
(`DataOptions.prefetch`). Reserved copies hold their rate on the link until they end;
unreserved ones (the MultiKueue-like baseline) ask for the copier's rate and get what the
link's other flows leave, as split jobs do (`speed.grants`). When a copy ends its data is
where it went (`DataState.arrived`)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import TYPE_CHECKING

from volcano_global.simulation import speed
from volcano_global.simulation.data import DataState
from volcano_global.simulation.running import Running
from volcano_global.simulation.workload import TraceJob
from volcano_global.solver.copies import Copy
from volcano_global.solver.data import CHECKPOINT
from volcano_global.solver.gravity import DataOptions

if TYPE_CHECKING:
    from volcano_global.simulation.engine import JobRecord

Flows = dict[str, dict[speed.Pair, float]]
DONE = 1e-6  # seconds: a copy ending within this of now has ended


class Copies:
    def __init__(self, data: DataState, options: DataOptions) -> None:
        self.data = data
        self.options = options
        self.fetching: list[tuple[float, tuple[Copy, ...]]] = []  # (ends at, copies)

    def start(
        self, run: Running, job: TraceJob, clusters: tuple[str, ...], copies: tuple[Copy, ...]
    ) -> None:
        """A start's copies begin: the job makes no progress until the last ends."""
        if not copies and not job.checkpoint_bytes:
            return
        run.staged_at = run.stalled_until = run.start + self.data.started(job, clusters, copies)
        run.copies = copies
        if not self.options.reserve:  # each copy's rate follows the link (`regrant`)
            run.copy_bits = [c.bytes * 8.0 for c in copies]

    def fetch(self, copies: tuple[Copy, ...], now: float) -> None:
        self.fetching.append((now + self.data.copied(copies), copies))

    def ended(self, running: dict[str, Running], records: dict[str, JobRecord], now: float) -> None:
        """Copies that have ended: their links are free, and their data is where they went."""
        for ends, copies in [f for f in self.fetching if f[0] <= now + DONE]:
            self.data.arrived(copies)
            self.fetching.remove((ends, copies))
        for run in running.values():
            if run.copies and run.staged_at <= now + DONE:
                self.data.arrived(run.copies)
                records[run.job.id].staging_s += now - run.start
                run.copies, run.copy_bits = (), []

    def ends(self, running: dict[str, Running], now: float) -> list[tuple[float, str]]:
        """When copies end (a round then: their bandwidth is free, their data arrived), as
        (time, a key for the wake-up)."""
        out = [(ends, copies[0].data) for ends, copies in self.fetching if ends > now]
        out += [(r.staged_at, r.job.id) for r in running.values() if r.copies and r.staged_at > now]
        return out

    def copying(self, running: dict[str, Running]) -> dict[str, tuple[str, ...]]:
        """Data on its way: name -> destinations (never copied there twice). Not checkpoints,
        as on the server (`services/data/copies.copying`): each job's is its own, though all
        are named `checkpoint`, and another job's on its way bars nothing."""
        bound: dict[str, set[str]] = defaultdict(set)
        in_flight = [copies for _, copies in self.fetching] + [r.copies for r in running.values()]
        for copies in in_flight:
            for c in copies:
                if c.data != CHECKPOINT:
                    bound[c.data].add(c.destination)
        return {name: tuple(sorted(where)) for name, where in bound.items()}

    def reserved(self, running: dict[str, Running]) -> Iterator[tuple[speed.Pair, float]]:
        """What copies hold on links (the round's input)."""
        for run in running.values():
            for c in run.copies if self.options.reserve else ():
                yield speed.pair(c.source, c.destination), c.gbps
        for _, copies in self.fetching:
            for c in copies:
                yield speed.pair(c.source, c.destination), c.gbps

    def demand(self, running: dict[str, Running]) -> Iterator[tuple[speed.Pair, float]]:
        """What copies ask of links now (an unreserved copy: the copier's rate)."""
        for run in running.values():
            for c in run.copies:
                yield speed.pair(c.source, c.destination), c.gbps
        for _, copies in self.fetching:
            for c in copies:
                yield speed.pair(c.source, c.destination), c.gbps

    def advance(self, run: Running, now: float) -> None:
        """An unreserved copy's progress since the run's last event, at the rate it had."""
        run.copy_bits = [
            max(bits - gbps * 1e9 * (now - run.last), 0.0)
            for bits, gbps in zip(run.copy_bits, run.copy_gbps, strict=False)
        ]

    def flows(self, running: dict[str, Running]) -> Flows:
        """Unreserved copies as flows asking for the copier's rate (`speed.grants`)."""
        return {
            _flow(job_id, i): {speed.pair(c.source, c.destination): c.gbps}
            for job_id, run in running.items()
            if run.copy_bits
            for i, c in enumerate(run.copies)
        }

    def regrant(self, running: dict[str, Running], granted: Flows, now: float) -> list[Running]:
        """Unreserved copies at the rate their links now grant; the jobs whose copies now end
        at another time (they start their work then)."""
        moved = []
        for job_id, run in running.items():
            if not run.copy_bits:
                continue
            run.copy_gbps = [
                max(sum(granted[_flow(job_id, i)].values()), 1e-6) for i in range(len(run.copies))
            ]
            ends = now + max(
                b / (g * 1e9) for b, g in zip(run.copy_bits, run.copy_gbps, strict=True)
            )
            if abs(ends - run.staged_at) > DONE:
                run.staged_at = run.stalled_until = ends
                run.version += 1
                moved.append(run)
        return moved


def _flow(job_id: str, i: int) -> str:
    return f"{job_id}\0copy{i}"
