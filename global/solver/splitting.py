"""The greedy splitter's rule, on units each cluster could take: clusters with most room
first, each taken only if it is linked to those already chosen with the bandwidth a split of
that many clusters needs, until the job's units are covered. Shared by the greedy policies
(`baselines`) and the reservations they and CP-SAT plan (`reservations`)."""

from __future__ import annotations

from volcano_global.solver.model import JobRequest, link_key
from volcano_global.solver.traffic import pair_demand_gbps


def split_units(
    job: JobRequest, capacity: dict[str, int], links: dict[tuple[str, str], float]
) -> dict[str, int] | None:
    """Units per cluster for a split of the job, every share at least its minimum and every
    pair linked with enough free bandwidth; None if the rule finds none."""
    chosen: list[str] = []
    for name in sorted(capacity, key=lambda c: (-capacity[c], c)):
        if capacity[name] < job.min_share_units or len(chosen) == job.cluster_limit:
            continue
        if sum(capacity[c] for c in chosen) >= job.units:
            break
        candidate = [*chosen, name]
        if links_allow(job, candidate, links):
            chosen = candidate
    units = _fill(job, chosen, capacity)
    if units is None or not links_allow(job, list(units), links):
        return None
    return units


def may_split(job: JobRequest, capacity: dict[str, int]) -> bool:
    """Whether `split_units` could find a split on these units per cluster, links aside: its
    shares are at most `cluster_limit` clusters of at least `min_share_units` units each and
    cover the job's units, so none is found when the largest such clusters cannot."""
    room = sorted((u for u in capacity.values() if u >= job.min_share_units), reverse=True)
    return sum(room[: job.cluster_limit]) >= job.units


def _fill(job: JobRequest, chosen: list[str], capacity: dict[str, int]) -> dict[str, int] | None:
    """Units per chosen cluster, biggest first, every share at least the minimum."""
    remaining = job.units
    units: dict[str, int] = {}
    for name in sorted(chosen, key=lambda c: (-capacity[c], c)):
        if remaining == 0:
            break
        take = min(capacity[name], remaining)
        if take < job.min_share_units:
            continue
        units[name] = take
        remaining -= take
    if remaining:
        return None
    small = [c for c, u in units.items() if u < job.min_share_units]
    return None if small else units


def links_allow(job: JobRequest, clusters: list[str], links: dict[tuple[str, str], float]) -> bool:
    demand = pair_demand_gbps(job.allreduce_gbps, len(clusters))
    for i, a in enumerate(clusters):
        for b in clusters[i + 1 :]:
            free = links.get(link_key(a, b))
            if free is None or free + 1e-9 < demand:
                return False
    return True
