"""`solver.planning`'s elastic rules, by hand: what a running elastic job may add (growth) and
what it gives back (shrinks) to a waiting job that outranks it."""

from __future__ import annotations

from volcano_global.solver import ClusterCapacity, JobRequest, Leaf, planning

# An elastic job of 8 replicas of 2 pods x 8 GPUs (16 GPUs a replica), at least 2.
ELASTIC = JobRequest("e", pods=16, gpus_per_pod=8, unit_pods=2, min_units=2, gpu_model="H100")


def run(*units_in: tuple[str, int], request: JobRequest = ELASTIC) -> planning.ElasticRun:
    return planning.ElasticRun(request, units_in, estimate_s=600.0)


def gang(job_id: str, gpus: int, *, due: bool = False, priority: int = 0) -> JobRequest:
    return JobRequest(
        job_id, pods=gpus // 8, gpus_per_pod=8, gpu_model="H100", due=due, priority=priority
    )


MODELS = {"a": ("H100",), "b": ("H100",)}


def test_growth_is_a_request_for_the_missing_replicas_in_the_clusters_it_runs_in() -> None:
    (grow,) = planning.growth([run(("a", 2), ("b", 3))], lowest_priority=-1)
    assert grow.id == "e" + planning.GROWTH and planning.grown_job(grow.id) == "e"
    assert (grow.pods, grow.unit_pods, grow.min_units) == (6, 2, 1)
    assert (grow.allowed_clusters, grow.splittable, grow.max_clusters) == (("a", "b"), True, 2)
    assert (grow.priority, grow.allreduce_gbps, grow.estimate_s) == (-1, 0.0, 600.0)
    # Already at full width, or rigid: nothing to add.
    assert planning.growth([run(("a", 8))], lowest_priority=None) == []
    rigid = JobRequest("r", pods=16, gpus_per_pod=8, unit_pods=2)
    assert planning.growth([run(("a", 2), request=rigid)], lowest_priority=None) == []


def test_a_due_job_gets_the_replicas_above_the_minimum_in_one_cluster() -> None:
    # 32 free GPUs in a; the due 64-GPU gang needs 32 more: two replicas of e (6 running in a).
    cuts = planning.shrinks(
        [gang("due", 64, due=True)],
        [run(("a", 6))],
        free_gpus={("a", "H100"): 32, ("b", "H100"): 0},
        cluster_models=MODELS,
    )
    assert cuts == [planning.Shrink("e", "a", 2, "due")]


def test_never_below_the_minimum_nor_a_splits_last_replica_in_a_cluster() -> None:
    # e runs 3 replicas (1 above its minimum of 2): a 48-GPU gang would need 3 back: none.
    assert (
        planning.shrinks(
            [gang("due", 48, due=True)],
            [run(("a", 3))],
            free_gpus={("a", "H100"): 0},
            cluster_models={"a": ("H100",)},
        )
        == []
    )
    # Split 1 + 4: the replica in a stays (its split and bandwidth), b gives up to 2 back.
    cuts = planning.shrinks(
        [gang("due", 32, due=True)],
        [run(("a", 1), ("b", 4))],
        free_gpus={("a", "H100"): 16, ("b", "H100"): 0},
        cluster_models=MODELS,
    )
    assert cuts == [planning.Shrink("e", "b", 2, "due")]


def test_only_a_job_that_outranks_it_and_the_lowest_priority_gives_first() -> None:
    waiting = [gang("later", 32)]  # not due, same priority: no shrink
    assert (
        planning.shrinks(
            waiting, [run(("a", 6))], free_gpus={("a", "H100"): 0}, cluster_models={"a": ("H100",)}
        )
        == []
    )
    low = run(("a", 4), request=JobRequest("low", 16, 8, "H100", unit_pods=2, min_units=2))
    high = run(
        ("a", 4), request=JobRequest("high", 16, 8, "H100", unit_pods=2, min_units=2, priority=1)
    )
    cuts = planning.shrinks(
        [gang("vip", 32, priority=2)],
        [high, low],
        free_gpus={("a", "H100"): 0},
        cluster_models={"a": ("H100",)},
    )
    assert cuts == [planning.Shrink("low", "a", 2, "vip")]
    # A job that fits where it is needs nothing back.
    assert (
        planning.shrinks(
            [gang("vip", 32, priority=2)],
            [low],
            free_gpus={("a", "H100"): 32},
            cluster_models={"a": ("H100",)},
        )
        == []
    )


def test_given_back_pods_are_the_last_placed_and_free_whole_nodes() -> None:
    assert planning.taken_back([("tor0", 4), ("tor1", 2)], 3) == [("tor1", 2), ("tor0", 1)]
    # tor0: 2 nodes busy (0 free), 1 node free (8); giving back 2 pods of 8 GPUs frees both.
    state = ClusterCapacity("a", (Leaf("H100", (2, 0, 0, 0, 0, 0, 0, 0, 1), ("tor0",), 8),))
    (after,) = planning.freed((state,), [("a", "tor0", "H100", 2, 8)])
    assert after.leaves[0].free_nodes == (0, 0, 0, 0, 0, 0, 0, 0, 3)
