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
- `remaining(gpus, elapsed, estimate, queue)`: the mean time left after `elapsed` a = the
  mean residual life E[D - a | D > a], when a running job is expected to free its GPUs (for
  holds, pending reasons, preemption's cost of waiting).
- `likely_within(gpus, estimate)`: a run time the job ends within with probability
  BACKFILL_QUANTILE, for backfill: a job may use reserved GPUs only if it is that likely to
  be gone in time. With heavy-tailed durations the mean would be far too hopeful (most jobs
  end sooner, the few that do not are the ones that hold a reservation up for hours).

**The tail.** The empirical mean residual life is exact in the body and wrong in the tail: with
only a few finished jobs longer than a, it rests on them alone and drops towards 0 as a nears
the longest of them, and past the longest it knows nothing (the module once fell back to the
class mean there: a 4-h gang that had outlived every finished peer was "expected to end in
minutes", and holds on its GPUs promised minutes for hours). Where fewer than TAIL_MIN finished
jobs ran longer than a, the residual life comes from a tail fitted to the TAIL_SHARE longest
samples (at least TAIL_MIN of them, above u, the largest sample below them): the largest of the
few samples' own, and of:

- exponential: the mean excess over u, m = mean(X_i - u | X_i > u). Memoryless, the least a
  job that has outlived its peers is owed: it never "ends in 0 s";
- Pareto (heavy tail): with Hill's estimate of the tail index, gamma = mean(ln(X_i / u) | X_i
  > u) (= 1 / alpha), P(D > a) ~ (a / u)^(-alpha) for a >= u, so E[D - a | D > a] =
  a / (alpha - 1) = a * gamma / (1 - gamma): it grows linearly with the age, the longer a
  job has outlived its peers the longer it is expected to go on (training runs that are not
  done at a few hours are often the multi-day ones). gamma is capped at GAMMA_MAX (an
  infinite-mean tail would promise nothing): at the cap the residual life equals the age.

A log-normal's residual life also grows with the age, a little slower (as a * sigma^2 / ln a);
the Pareto form is the simple one, and needs only the top order statistics, fitted once per
class when its samples change (memoised like the rest of the fit), so `remaining` stays a
binary search and a few multiplications for the hundreds of running jobs of every round.

**Estimates.** A user's `runningEstimate` e is believed, corrected by how the queue's finished
jobs met theirs: the ratios actual / estimate of a queue's finished jobs that gave one (at
least MIN_RATIOS of them; else the fleet's, else none) form a distribution R, and the job's
remaining time is e times R's mean residual life past a / e, the same body-and-tail reading.
Without ratios: e - a while the job is within its estimate; once it overruns, the size class's
residual life at a (never 0: an overrun job is not "ending in 0 s").

A class with fewer than MIN_SAMPLES finished jobs borrows the whole fleet's distribution; with
none at all, DEFAULT_S stands in (a constant residual life: memoryless).
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict, deque
from collections.abc import Iterable

SIZE_EDGES = (1, 8, 64, 256)  # classes: 1, 2-8, 9-64, 65-256, >256 GPUs
MIN_SAMPLES = 20
MIN_RATIOS = 5  # finished jobs with an estimate before a queue's estimate error is learnt
KEPT = 2000  # newest finished durations kept per class
DEFAULT_S = 3600.0
BACKFILL_QUANTILE = 0.75
TAIL_SHARE = 0.1  # the longest tenth of the samples is the tail the model is fitted to
TAIL_MIN = 5  # ... and at least this many of them
GAMMA_MAX = 0.5  # Hill index cap: at most the residual life equals the age


def size_class_of(gpus: int) -> int:
    return bisect.bisect_left(SIZE_EDGES, gpus)


class DurationModel:
    def __init__(self, finished: Iterable[tuple[int, float]] = ()) -> None:
        self._samples: dict[int | None, deque[float]] = defaultdict(lambda: deque(maxlen=KEPT))
        self._fitted: dict[int | None, _Fit] = {}
        # actual / estimate of finished jobs that gave an estimate, per queue (None: fleet)
        self._ratios: dict[str | None, deque[float]] = defaultdict(lambda: deque(maxlen=KEPT))
        self._ratio_fits: dict[str | None, _Fit] = {}
        for gpus, seconds in finished:
            self.observe(gpus, seconds)

    def observe(
        self,
        gpus: int,
        seconds: float,
        *,
        estimate: float | None = None,
        queue: str | None = None,
    ) -> None:
        """A job of `gpus` GPUs finished after `seconds` of running (its runningEstimate
        `estimate` and its queue, if known: how well the queue's estimates hold)."""
        seconds = max(float(seconds), 0.0)
        for key in (size_class_of(gpus), None):
            self._samples[key].append(seconds)
            self._fitted.pop(key, None)
        if estimate is not None and estimate > 0:
            for where in {queue, None}:
                self._ratios[where].append(seconds / estimate)
                self._ratio_fits.pop(where, None)

    def service(self, gpus: int, estimate: float | None = None) -> float:
        width = max(gpus, 1)
        if estimate is not None:
            return width * estimate
        return width * self._fit(gpus).gittins

    def likely_within(self, gpus: int, estimate: float | None = None) -> float:
        return estimate if estimate is not None else self._fit(gpus).quantile(BACKFILL_QUANTILE)

    def remaining(
        self,
        gpus: int,
        elapsed: float,
        estimate: float | None = None,
        *,
        queue: str | None = None,
    ) -> float:
        """Seconds a job of `gpus` GPUs that has run `elapsed` is expected to go on for
        (module docstring): never 0, growing with the age once it outlives its peers."""
        elapsed = max(elapsed, 0.0)
        if estimate is None or estimate <= 0:
            return self._fit(gpus).mean_left(elapsed)
        ratios = self._ratio_fit(queue)
        if ratios is not None:
            return estimate * ratios.mean_left(elapsed / estimate)
        if estimate > elapsed:
            return estimate - elapsed
        return self._fit(gpus).mean_left(elapsed)  # it overran its estimate

    def estimate_error(self, queue: str | None = None) -> float | None:
        """The median actual / estimate of the queue's finished jobs (None: too few)."""
        fit = self._ratio_fit(queue)
        return None if fit is None else fit.quantile(0.5)

    def _fit(self, gpus: int) -> _Fit:
        key: int | None = size_class_of(gpus)
        if len(self._samples.get(key, ())) < MIN_SAMPLES:
            key = None
        fit = self._fitted.get(key)
        if fit is None:
            fit = self._fitted[key] = _Fit(sorted(self._samples.get(key, ())))
        return fit

    def _ratio_fit(self, queue: str | None) -> _Fit | None:
        key = queue if len(self._ratios.get(queue, ())) >= MIN_RATIOS else None
        if len(self._ratios.get(key, ())) < MIN_RATIOS:
            return None
        fit = self._ratio_fits.get(key)
        if fit is None:
            fit = self._ratio_fits[key] = _Fit(sorted(self._ratios[key]))
        return fit


class _Fit:
    """An empirical distribution, its fitted tail, and the quantities read from them."""

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
        self.excess, self.slope = self._tail()

    def _tail(self) -> tuple[float, float]:
        """(the mean excess over u, gamma / (1 - gamma)): the fitted tail (docstring)."""
        n = len(self.ordered)
        k = min(max(TAIL_MIN, int(TAIL_SHARE * n)), n - 1)
        if k < 1:
            return self.mean, 0.0  # one sample: memoryless with its mean
        u = self.ordered[n - k - 1]
        top = self.ordered[n - k :]
        excess = (self.prefix[n] - self.prefix[n - k]) / k - u
        if excess <= 0:
            excess = self.mean  # every tail sample equal: nothing to fit, memoryless
        gamma = sum(math.log(x / u) for x in top) / k if u > 0 else 0.0
        gamma = min(gamma, GAMMA_MAX)
        return excess, gamma / (1.0 - gamma)

    def quantile(self, q: float) -> float:
        return self.ordered[min(int(q * len(self.ordered)), len(self.ordered) - 1)]

    def mean_left(self, elapsed: float) -> float:
        """E[D - elapsed | D > elapsed]: the samples' while TAIL_MIN of them are longer; past
        that the largest of theirs, the exponential tail's and the Pareto tail's (module
        docstring)."""
        i = bisect.bisect_right(self.ordered, elapsed)
        longer = len(self.ordered) - i
        body = (self.prefix[-1] - self.prefix[i]) / longer - elapsed if longer else 0.0
        if longer >= max(min(TAIL_MIN, len(self.ordered) - 1), 1):
            return body
        return max(body, self.excess, elapsed * self.slope)
