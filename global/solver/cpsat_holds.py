"""The short horizon in the placement model (`cpsat_model`): each job owed a reservation starts
now or gets one of its options (h_o), chosen together with what starts now."""

from __future__ import annotations

import itertools
import math

from ortools.sat.python import cp_model

from volcano_global.solver.cpsat_model import RES_PER_GBPS, JobVars
from volcano_global.solver.reservations import Hold, Owed
from volcano_global.solver.values import reservation_value


def add_reservations(  # type: ignore[no-untyped-def]
    model: cp_model.CpModel,
    vars_: list[JobVars],
    owed: list[Owed],
    weights: dict[str, int],
    normal: dict[str, int],
):
    """The short horizon: each job owed a reservation starts now or gets one of its options
    (the earliest time in each cluster, or a split), chosen together with what starts now.
    A reservation is worth as much as starting now, less the job's own value for the wait
    (in proportion to its start time over the latest option's): so the model takes a later
    reservation only where that lets more, or more important, work start now. Jobs that would
    still run when a chosen reservation starts fit in its spare GPUs and bandwidth; two
    reservations never share a cluster."""
    by_id = {v.job.id: v for v in vars_}
    chosen: list[tuple[Hold, cp_model.IntVar]] = []
    value = 0
    for entry in owed:
        v = by_id.get(entry.job.id)
        if v is None:
            continue
        picks = []
        for k, hold in enumerate(entry.options):
            p = model.new_bool_var(f"h[{entry.job.id},{k}]")
            picks.append(p)
            chosen.append((hold, p))
            value += reservation_value(entry, hold, weights, normal) * p
            _hold_constraints(model, vars_, hold, p)
        model.add(sum(picks) + v.admitted <= 1)
    for (a, pa), (b, pb) in itertools.combinations(chosen, 2):
        if a.job_id != b.job_id and a.clusters & b.clusters:
            model.add(pa + pb <= 1)
    return chosen, value


def _hold_constraints(
    model: cp_model.CpModel, vars_: list[JobVars], hold: Hold, chosen: cp_model.IntVar
) -> None:
    bound = [v for v in vars_ if hold.binds(v.job)]
    for (cluster, gpu_model), spare in hold.spare.items():
        terms = [
            v.job.unit_gpus * v.units[cluster]
            for v in bound
            if cluster in v.units and v.model_in[cluster] == gpu_model
        ]
        if terms:
            model.add(sum(terms) <= max(spare, 0)).only_enforce_if(chosen)
    for key, spare_gbps in hold.link_spare.items():
        terms = [v.reserve[key] for v in bound if key in v.reserve]
        if terms:
            limit = math.floor(max(spare_gbps, 0.0) * RES_PER_GBPS)
            model.add(sum(terms) <= limit).only_enforce_if(chosen)


def hint_holds(
    model: cp_model.CpModel, chosen: list[tuple[Hold, cp_model.IntVar]], hinted: list[Hold]
) -> None:
    """Hint the reservations the heuristic chose."""
    same = {(h.job_id, h.start_in_s, tuple(sorted(h.gpus))) for h in hinted}
    for hold, p in chosen:
        model.add_hint(p, (hold.job_id, hold.start_in_s, tuple(sorted(hold.gpus))) in same)
