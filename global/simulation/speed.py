"""How placement changes a job's speed. One model, applied the same way to every policy.

A job's duration in the trace is its run time at full speed: whole in one cluster, every
data-parallel replica where it asked to be. Two things slow it down:

1. **Crossing clusters with less bandwidth than it needs.** A job split over k clusters
   exchanges its gradient between every pair of parts each step (the traffic model of
   docs/placement.md): each pair must carry d = 2 (V/tau) / k per direction to finish within the
   share s of the step it tolerates, which it does in the background of compute. If a pair only
   gets g < d, that exchange takes tau * d / g instead of tau, and the step grows by the excess:
   step factor = 1 + s * (d / g - 1) for the worst pair. A link whose split jobs together need
   more than its capacity gives each of them capacity * d / (sum of d) (fair sharing by demand,
   what TCP-like flows of equal RTT roughly get). A pair of clusters with no link at all is
   routed over a 10 Gbps WAN path. Jobs that declare nothing (V/tau = 0) are not slowed.
2. **A data-parallel replica that had to stay under one tier-1 switch and did not** (its
   pipeline stages then cross a tier): step factor 1.15. Applied when a job with a unit tier
   has a share whose pods per leaf HyperNode are not whole units.

Assumptions, stated because they decide the results: the exchange overlaps compute up to the
declared share and not beyond; bandwidth is the only cross-cluster cost (latency ignored);
the factors multiply; speeds are recomputed whenever a split job starts or ends on a link.
"""

from __future__ import annotations

from volcano_global.solver.traffic import pair_demand_gbps

FALLBACK_GBPS = 10.0
TIER_PENALTY = 1.15

Pair = tuple[str, str]


def pair(a: str, b: str) -> Pair:
    return (a, b) if a <= b else (b, a)


def needs(allreduce_gbps: float, clusters: list[str]) -> dict[Pair, float]:
    """What each pair of a split needs per direction (empty for one cluster or no plan)."""
    if len(clusters) < 2 or allreduce_gbps <= 0:
        return {}
    d = pair_demand_gbps(allreduce_gbps, len(clusters))
    names = sorted(clusters)
    return {(a, b): d for i, a in enumerate(names) for b in names[i + 1 :]}


def grants(
    demands: dict[str, dict[Pair, float]], capacity: dict[Pair, float]
) -> dict[str, dict[Pair, float]]:
    """Bandwidth each job gets on each pair: all it needs while the link has room, else its
    demand-proportional part of the capacity."""
    total: dict[Pair, float] = {}
    for need in demands.values():
        for p, d in need.items():
            total[p] = total.get(p, 0.0) + d
    granted: dict[str, dict[Pair, float]] = {}
    for job, need in demands.items():
        granted[job] = {}
        for p, d in need.items():
            cap = capacity.get(p, FALLBACK_GBPS)
            granted[job][p] = d if total[p] <= cap else cap * d / total[p]
    return granted


def step_factor(
    *, comm_share: float, need: dict[Pair, float], got: dict[Pair, float], unit_broken: bool
) -> float:
    factor = 1.0
    if need:
        ratio = min(got[p] / d for p, d in need.items())
        if ratio < 1.0:
            factor *= 1.0 + comm_share * (1.0 / max(ratio, 1e-9) - 1.0)
    if unit_broken:
        factor *= TIER_PENALTY
    return factor
