"""Data gravity in `plan_round` over random rounds (fixed seeds): splits, copies and
preemptors of one round never oversubscribe a link, and no copy brings data where another
copy brings it."""

from __future__ import annotations

import random
from functools import partial
from typing import Any

import pytest

from tests.solver_support.gravity import Demand, gang, random_round, reads
from volcano_global.solver import Policy
from volcano_global.solver.data import DataNeeds
from volcano_global.solver.gravity import DataOptions
from volcano_global.solver.model import link_key
from volcano_global.solver.preemption import PREEMPT, Rules
from volcano_global.solver.round_plan import RoundOptions, Waiting, plan_round

NAMES = ("a", "b", "c", "d")
REGIONS = {"a": "x", "b": "x", "c": "y", "d": "y"}
HOLDERS = ("a", "c", "d")  # of d0, d1, d2 in the rounds with copies in flight


@pytest.mark.parametrize("ahead", [False, True])
def test_splits_copies_and_preemptors_of_one_round_never_oversubscribe_a_link(
    ahead: bool,
) -> None:
    """`ahead`: with prefetch and replication on too (every dataset popular), their copies
    counted with the rest."""
    rng = random.Random(7)
    copies = splits = evictions = replicas = fetched = 0
    more = DataOptions(prefetch=True, replicate_readers=1) if ahead else DataOptions()
    for round_ in range(40):
        evicting = round_ % 2 == 1
        may = {"priority": 10, "may_evict_for": frozenset({PREEMPT})} if evicting else {}
        demand = partial(_splittable_or_not, may=may)
        data = random_round(rng, NAMES, demand, regions=REGIONS if ahead else {})
        links = data.links
        rules = Rules(min_run_s=0, wait_weight=None) if evicting else None
        plan = plan_round(data, Policy.CPSAT, RoundOptions(preemption=rules, data=more))
        held = {x.key: x.reserved_gbps for x in links}
        for d in (*plan.starts, *(e.placement for e in plan.evictions)):
            for r in d.reservations:
                held[link_key(r.a, r.b)] += r.gbps
        for group in (*plan.staging.values(), *plan.prefetch.values(), plan.replicas):
            for c in group:
                held[link_key(c.source, c.destination)] += c.gbps
        fetched += sum(len(g) for g in plan.prefetch.values())
        for x in links:
            assert held[x.key] <= x.capacity_gbps + 1e-6, (x, held[x.key])
        copies += sum(len(g) for g in plan.staging.values())
        replicas += len(plan.replicas)
        splits += sum(len(d.shares) > 1 for d in plan.starts)
        evictions += len(plan.evictions)
    # the rounds staged, split, evicted (fewer evictions ahead: a job that may evict has its
    # data prefetched where room comes first instead of evicting to stage)
    assert copies > 10 and splits > 5 and evictions > (1 if ahead else 3)
    assert replicas > 5 if ahead else replicas == 0
    assert fetched > 3 if ahead else fetched == 0


def test_no_copy_of_a_round_brings_data_where_another_copy_brings_it() -> None:
    """Random rounds with staging, prefetch, preemptors and replication, few datasets read
    by many jobs, and copies of earlier rounds in flight: no (data, destination) is copied
    twice, nor into a cluster an earlier copy is bound for."""
    rng = random.Random(7)
    options = DataOptions(prefetch=True, replicate_readers=1)
    kinds: dict[str, int] = {}
    for round_ in range(60):
        may = {"priority": 10, "may_evict_for": frozenset({PREEMPT})} if round_ % 2 else {}
        data = random_round(rng, NAMES, partial(_readers_of_few, may=may), regions=REGIONS)
        copying = data.copying
        rules = Rules(min_run_s=0, wait_weight=None) if round_ % 2 else None
        plan = plan_round(data, Policy.CPSAT, RoundOptions(preemption=rules, data=options))
        seen = {(name, d) for name, where in copying.items() for d in where}
        preemptors = {e.preemptor for e in plan.evictions}
        for kind, groups in (
            ("staging", plan.staging.values()),
            ("prefetch", plan.prefetch.values()),
            ("replica", (plan.replicas,)),
        ):
            for group in groups:
                for c in group:
                    assert (c.data, c.destination) not in seen, (round_, kind, c)
                    seen.add((c.data, c.destination))
                    kinds[kind] = kinds.get(kind, 0) + 1
        kinds["preemptor"] = kinds.get("preemptor", 0) + len(preemptors & set(plan.staging))
    assert all(kinds.get(k, 0) > 3 for k in ("staging", "prefetch", "replica", "preemptor"))


def _splittable_or_not(rng: random.Random, may: dict[str, Any]) -> Demand:
    """Six jobs, each splittable or whole at random, each reading a dataset of its own."""
    waiting, needs = [], {}
    for n in range(6):
        job = f"j{n}"
        if rng.random() < 0.5:
            waiting.append(
                gang(
                    job,
                    8 * rng.randint(2, 6),
                    unit_pods=1,
                    splittable=True,
                    max_clusters=3,
                    allreduce_gbps=rng.choice((20.0, 60.0)),
                    **may,
                )
            )
        else:
            waiting.append(gang(job, 8 * rng.randint(1, 3), **may))
        needs[job] = reads(rng.choice((0.5, 5.0)), rng.choice(NAMES), name=f"d{n}")
    return waiting, needs, {}


def _readers_of_few(rng: random.Random, may: dict[str, Any]) -> Demand:
    """Six whole jobs reading three datasets, and at times a copy of one in flight."""
    waiting: list[Waiting] = []
    needs: dict[str, DataNeeds] = {}
    for n in range(6):
        waiting.append(gang(f"j{n}", 8 * rng.randint(1, 3), **may))
        k = rng.randint(0, 2)
        needs[f"j{n}"] = reads((0.5, 5.0, 2.0)[k], HOLDERS[k], name=f"d{k}")
    copying = {f"d{rng.randint(0, 2)}": (rng.choice(NAMES),)} if rng.random() < 0.5 else {}
    return waiting, needs, copying
