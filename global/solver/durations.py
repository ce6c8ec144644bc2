"""How long jobs run, learnt from the jobs that finished, without an oracle.

The scheduler never sees a job's true duration. It knows the durations of jobs that finished
(per size class, since large gangs run longer than notebooks on most fleets) and, when the user
gave one, a job's `runningEstimate`. From those:

- `service(gpus, estimate)`: what a waiting job is expected to cost, for the order (lower
  goes first). With an estimate, GPUs x estimate. Without, the Gittins index of the job's class
  duration distribution at zero attained service, as GPU-seconds: GPUs x min over horizons d of
  E[min(D, d)] / P(D <= d). For a heavy-tailed distribution this is far below the mean: most
  jobs are short, and serving the likely-short first is what minimises the average wait
  (Gittins; Tiresias's discretised 2D-Gittins uses the same idea on GPUs x time).
- `remaining(gpus, elapsed, estimate)`: the mean time left after `elapsed` (E[D - a | D > a]),
  when a running job is expected to free its GPUs (for reservations).
- `likely_within(gpus, estimate)`: a run time the job ends within with probability
  BACKFILL_QUANTILE, for backfill: a job may use reserved GPUs only if it is that likely to
  be gone in time. With heavy-tailed durations the mean would be far too hopeful (most jobs
  end sooner, the few that do not are the ones that hold a reservation up for hours).

A class with fewer than MIN_SAMPLES finished jobs borrows the whole fleet's distribution; with
none at all, DEFAULT_S stands in.
"""

from __future__ import annotations

import bisect
from collections import defaultdict, deque
from collections.abc import Iterable

SIZE_EDGES = (1, 8, 64, 256)  # classes: 1, 2-8, 9-64, 65-256, >256 GPUs
MIN_SAMPLES = 20
KEPT = 2000  # newest finished durations kept per class
DEFAULT_S = 3600.0
BACKFILL_QUANTILE = 0.75


def size_class_of(gpus: int) -> int:
    return bisect.bisect_left(SIZE_EDGES, gpus)


class DurationModel:
    def __init__(self, finished: Iterable[tuple[int, float]] = ()) -> None:
        self._samples: dict[int | None, deque[float]] = defaultdict(lambda: deque(maxlen=KEPT))
        self._fitted: dict[int | None, _Fit] = {}
        for gpus, seconds in finished:
            self.observe(gpus, seconds)

    def observe(self, gpus: int, seconds: float) -> None:
        """A job of `gpus` GPUs finished after `seconds` of running."""
        seconds = max(float(seconds), 0.0)
        for key in (size_class_of(gpus), None):
            self._samples[key].append(seconds)
            self._fitted.pop(key, None)

    def service(self, gpus: int, estimate: float | None = None) -> float:
        width = max(gpus, 1)
        if estimate is not None:
            return width * estimate
        return width * self._fit(gpus).gittins

    def likely_within(self, gpus: int, estimate: float | None = None) -> float:
        return estimate if estimate is not None else self._fit(gpus).quantile(BACKFILL_QUANTILE)

    def remaining(self, gpus: int, elapsed: float, estimate: float | None = None) -> float:
        if estimate is not None and estimate > elapsed:
            return estimate - elapsed
        return self._fit(gpus).mean_left(elapsed)

    def _fit(self, gpus: int) -> _Fit:
        key: int | None = size_class_of(gpus)
        if len(self._samples.get(key, ())) < MIN_SAMPLES:
            key = None
        fit = self._fitted.get(key)
        if fit is None:
            fit = self._fitted[key] = _Fit(sorted(self._samples.get(key, ())))
        return fit


class _Fit:
    """An empirical distribution and the quantities read from it."""

    def __init__(self, ordered: list[float]) -> None:
        self.ordered = ordered or [DEFAULT_S]
        n = len(self.ordered)
        self.prefix = [0.0]
        for v in self.ordered:
            self.prefix.append(self.prefix[-1] + v)
        self.mean = self.prefix[-1] / n
        # Gittins at 0: min over d in the sample of E[min(D, d)] / P(D <= d).
        best = self.mean
        for i, d in enumerate(self.ordered):
            below = i + 1  # samples <= d (ties share the last index)
            if i + 1 < n and self.ordered[i + 1] == d:
                continue
            truncated = (self.prefix[below] + d * (n - below)) / n
            best = min(best, truncated / (below / n))
        self.gittins = best

    def quantile(self, q: float) -> float:
        return self.ordered[min(int(q * len(self.ordered)), len(self.ordered) - 1)]

    def mean_left(self, elapsed: float) -> float:
        """E[D - elapsed | D > elapsed]; past every sample, the mean again (we know nothing)."""
        i = bisect.bisect_right(self.ordered, elapsed)
        longer = len(self.ordered) - i
        if longer == 0:
            return self.mean
        return (self.prefix[-1] - self.prefix[i]) / longer - elapsed
