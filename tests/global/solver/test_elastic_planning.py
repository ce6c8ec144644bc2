"""`solver.planning`'s elastic rules, by hand: what a running elastic job may add (growth, and
its hysteresis) and which of its pods a shrink gives back (`test_shrinking.py`: when)."""

from __future__ import annotations

from volcano_global.solver import ClusterCapacity, JobRequest, Leaf, planning

# An elastic job of 8 replicas of 2 pods x 8 GPUs (16 GPUs a replica), at least 2.
ELASTIC = JobRequest("e", pods=16, gpus_per_pod=8, unit_pods=2, min_units=2, gpu_model="H100")


def run(*units_in: tuple[str, int], request: JobRequest = ELASTIC) -> planning.ElasticRun:
    return planning.ElasticRun(request, units_in, estimate_s=600.0)


def test_growth_is_a_request_for_the_missing_replicas_in_the_clusters_it_runs_in() -> None:
    (grow,) = planning.growth([run(("a", 2), ("b", 3))], lowest_priority=-1)
    assert grow.id == "e" and grow.grows  # under the running job's id, marked as growth
    # 5 running of 8: 3 to add, at least 2 of them (a quarter of 5, rounded up).
    assert (grow.pods, grow.unit_pods, grow.min_units) == (6, 2, 2)
    assert (grow.allowed_clusters, grow.splittable, grow.max_clusters) == (("a", "b"), True, 2)
    assert (grow.priority, grow.allreduce_gbps, grow.estimate_s) == (-1, 0.0, 600.0)
    # Already at full width, or rigid: nothing to add.
    assert planning.growth([run(("a", 8))], lowest_priority=None) == []
    rigid = JobRequest("r", pods=16, gpus_per_pod=8, unit_pods=2)
    assert planning.growth([run(("a", 2), request=rigid)], lowest_priority=None) == []


def test_growth_waits_the_interval_after_a_start_or_resize() -> None:
    hysteresis = planning.Hysteresis(min_interval_s=600.0)
    recent = planning.ElasticRun(ELASTIC, (("a", 2),), since_s=599.0)
    assert planning.growth([recent], lowest_priority=None, hysteresis=hysteresis) == []
    settled = planning.ElasticRun(ELASTIC, (("a", 2),), since_s=600.0)
    assert len(planning.growth([settled], lowest_priority=None, hysteresis=hysteresis)) == 1


def test_growth_adds_at_least_a_quarter_of_the_width_and_a_replica() -> None:
    def least(width: int) -> int | None:
        grow = planning.growth([run(("a", width))], lowest_priority=None)
        return (grow[0].min_units or grow[0].units) if grow else None

    # 8 replicas in all. From 4: at least 1 (of 4). From 5: 1.25 -> 2 (of 3). From 6: 2, all
    # that is left (a rigid request for both). From 7: 2 needed, 1 left: it stays at 7.
    assert [least(w) for w in (4, 5, 6, 7)] == [1, 2, 2, None]
    # No hysteresis: any replica.
    loose = planning.Hysteresis(min_interval_s=0.0, min_growth=0.0)
    (grow,) = planning.growth([run(("a", 7))], lowest_priority=None, hysteresis=loose)
    assert grow.units == 1


def test_given_back_pods_are_the_last_placed_and_free_whole_nodes() -> None:
    assert planning.taken_back([("tor0", 4), ("tor1", 2)], 3) == [("tor1", 2), ("tor0", 1)]
    # tor0: 2 nodes busy (0 free), 1 node free (8); giving back 2 pods of 8 GPUs frees both.
    state = ClusterCapacity("a", (Leaf("H100", (2, 0, 0, 0, 0, 0, 0, 0, 1), ("tor0",), 8),))
    (after,) = planning.freed((state,), [("a", "tor0", "H100", 2, 8)])
    assert after.leaves[0].free_nodes == (0, 0, 0, 0, 0, 0, 0, 0, 3)
