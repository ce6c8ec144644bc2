"""Replication ahead of demand in `plan_round` (step 6c), by hand: a popular corpus gets one
copy into the region that has none, to its cluster with the most free GPUs; below the
threshold, with nothing waiting or with no data declared, nothing; the caller's count of
recent readers counts; a copy never takes more than a link has left after the round's
starts and their copies, and data a start of the round or an earlier copy brings into a
region is not sent there again."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from volcano_global.solver import (
    ClusterCapacity,
    JobRequest,
    Leaf,
    LinkState,
    Policy,
    RunningJob,
    planning,
)
from volcano_global.solver.copies import Copy
from volcano_global.solver.data import DataNeeds, DatasetNeed
from volcano_global.solver.gravity import DataOptions
from volcano_global.solver.preemption import PREEMPT, Rules
from volcano_global.solver.replication import Popularity
from volcano_global.solver.round_plan import RoundInput, RoundOptions, Waiting, plan_round

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
TIB = 2**40
REGIONS = {"us-a": "us", "eu-a": "eu", "eu-b": "eu"}
ON = RoundOptions(data=DataOptions(replicate_readers=3))


def cluster(name: str, free_nodes: int, used_nodes: int = 0) -> ClusterCapacity:
    hist = (used_nodes,) + (0,) * 7 + (free_nodes,)
    return ClusterCapacity(name, (Leaf("H100", hist, (name,), node_gpus=8),))


def gang(job_id: str, gpus: int = 16, **kw: object) -> Waiting:
    request = JobRequest(job_id, pods=gpus // 8, gpus_per_pod=8, gpu_model="H100", **kw)  # type: ignore[arg-type]
    return Waiting(request, NOW - timedelta(minutes=5))


def reads(name: str, size_tib: float = 27) -> DataNeeds:
    return DataNeeds(datasets=(DatasetNeed(name, int(size_tib * TIB), ("us-a",)),))


def fleet(readers: dict[str, str], *, eu_link_reserved: float = 0.0, **kw: object) -> RoundInput:
    """us-a holds every corpus and is full for 10 min, with room for every reader then (so each
    waits for it: a copy of 27 TiB at 100 Gbps takes 40 min); eu-a has 6 free nodes, eu-b 2;
    us-a - eu-a 100 Gbps (`eu_link_reserved` of it held), us-a - eu-b 100 Gbps, eu-a - eu-b
    400 Gbps."""
    nodes = 2 * len(readers)
    return RoundInput(
        NOW,
        (cluster("us-a", 0, nodes), cluster("eu-a", 6), cluster("eu-b", 2)),
        (
            LinkState("us-a", "eu-a", 100.0, eu_link_reserved),
            LinkState("us-a", "eu-b", 100.0),
            LinkState("eu-a", "eu-b", 400.0),
        ),
        waiting=tuple(gang(j) for j in readers),
        running=(RunningJob("r", (("us-a", "H100", 8 * nodes),), ends_in_s=600.0),),
        data={j: reads(name) for j, name in readers.items()},
        regions=REGIONS,
        **kw,  # type: ignore[arg-type]
    )


def test_a_popular_corpus_is_copied_once_into_the_region_that_has_none() -> None:
    data = fleet({"j1": "corpus", "j2": "corpus", "j3": "corpus"})
    plan = plan_round(data, Policy.CPSAT, ON)
    assert plan.starts == ()  # each waits 10 min for us-a rather than stage for 40
    # One copy for three readers, into eu's cluster with the most free GPUs, at the copier's
    # rate; region us holds it already.
    assert plan.replicas == (Copy("corpus", 27 * TIB, "us-a", "eu-a", 100.0),)
    assert plan.staging == {} and plan.prefetch == {}
    # Once on its way into eu (to either cluster), it is not sent again.
    again = RoundInput(**{**data.__dict__, "copying": {"corpus": ("eu-b",)}})
    assert plan_round(again, Policy.CPSAT, ON).replicas == ()


def test_below_the_threshold_nothing_unless_the_recent_readers_count() -> None:
    data = fleet({"j1": "corpus", "j2": "corpus"})
    assert plan_round(data, Policy.CPSAT, ON).replicas == ()
    # Two wait now, but five jobs read it lately (the caller's count): popular.
    recent = {"corpus": Popularity(5, 27 * TIB, ("us-a",))}
    counted = RoundInput(**{**data.__dict__, "popularity": recent})
    (copy,) = plan_round(counted, Policy.CPSAT, ON).replicas
    assert (copy.data, copy.destination) == ("corpus", "eu-a")
    # Off (the default), never.
    assert plan_round(counted, Policy.CPSAT).replicas == ()


def test_nothing_when_nothing_waits_or_no_data_is_declared() -> None:
    idle = RoundInput(
        NOW, (cluster("us-a", 4), cluster("eu-a", 4)), (LinkState("us-a", "eu-a", 100.0),)
    )
    assert plan_round(idle, Policy.CPSAT, ON).replicas == ()
    plain = RoundInput(
        NOW,
        (cluster("us-a", 0, 4), cluster("eu-a", 6), cluster("eu-b", 2)),
        (LinkState("us-a", "eu-a", 100.0),),
        waiting=(gang("j1"), gang("j2"), gang("j3")),
        regions=REGIONS,
    )
    on, off = plan_round(plain, Policy.CPSAT, ON), plan_round(plain, Policy.CPSAT)
    assert on.replicas == ()
    assert on.starts == off.starts and on.outcomes == off.outcomes


def test_a_copy_takes_only_what_the_link_has_left_and_never_below_the_minimum() -> None:
    # 70 of us-a - eu-a's 100 Gbps are held: the most read corpus gets 30; the next finds eu's
    # other link (us-a - eu-b) and goes to eu-b; the third finds nothing left of at least
    # 10 Gbps on either and is not copied.
    readers = {f"a{i}": "corpus-a" for i in range(5)}
    readers |= {f"b{i}": "corpus-b" for i in range(4)}
    readers |= {f"c{i}": "corpus-c" for i in range(3)}
    data = fleet(readers, eu_link_reserved=70.0)
    plan = plan_round(data, Policy.CPSAT, ON)
    assert plan.starts == ()
    assert [(c.data, c.source, c.destination, c.gbps) for c in plan.replicas] == [
        ("corpus-a", "us-a", "eu-a", 30.0),
        ("corpus-b", "us-a", "eu-b", 100.0),
    ]
    held = {x.key: x.reserved_gbps for x in data.links}
    for c in plan.replicas:
        key = tuple(sorted((c.source, c.destination)))
        held[key] += c.gbps  # type: ignore[index]
    assert all(held[x.key] <= x.capacity_gbps + 1e-9 for x in data.links)


def test_data_a_start_of_the_round_stages_into_a_region_is_not_sent_there_again() -> None:
    # us-a is full for 10 h now: two readers stage into eu (eu-a and eu-b, a copy each at
    # 50 Gbps, the copier's rate here, so each link has 50 left); the round sends no replica
    # of the same corpus into eu on top of the starts' copies.
    data = fleet({"j1": "corpus", "j2": "corpus", "j3": "corpus"})
    data = RoundInput(
        **{
            **data.__dict__,
            "running": (RunningJob("r", (("us-a", "H100", 48),), ends_in_s=36000.0),),
        }
    )
    options = RoundOptions(data=DataOptions(replicate_readers=3, staging_gbps=50.0))
    plan = plan_round(data, Policy.CPSAT, options)
    assert len(plan.starts) == 2
    staged = {c.destination for group in plan.staging.values() for c in group}
    assert staged <= {"eu-a", "eu-b"}
    assert plan.replicas == ()


def test_a_cluster_without_a_region_is_never_a_destination_nor_a_region() -> None:
    data = fleet({"j1": "corpus", "j2": "corpus", "j3": "corpus"})
    # No region known, or only the holder's: the clusters without one get nothing (as regions
    # of their own, each would get every popular dataset).
    for regions in ({}, {"us-a": "us"}):
        assert plan_round(replace(data, regions=regions), Policy.CPSAT, ON).replicas == ()
    # A region named like an unlabelled cluster is not that cluster: eu-a (no region) is not
    # in region "eu-a", which has no holder, so its one cluster, eu-b, gets the copy.
    named = replace(data, regions={"us-a": "us", "eu-b": "eu-a"})
    assert [(c.source, c.destination) for c in plan_round(named, Policy.CPSAT, ON).replicas] == [
        ("us-a", "eu-b")
    ]
    # An unlabelled holder is still a source.
    unlabelled = replace(data, regions={"eu-a": "eu", "eu-b": "eu"})
    assert [
        (c.source, c.destination) for c in plan_round(unlabelled, Policy.CPSAT, ON).replicas
    ] == [("us-a", "eu-a")]


def test_a_preemptor_copies_its_data_before_a_replica_and_only_once() -> None:
    # "j" (priority 10, reads a 1 TiB corpus held in us-a, full for 10 h) evicts v1 in eu-a
    # and stages the corpus us-a -> eu-a; read by one job, the corpus is popular at 1.
    def victim(job_id: str) -> RunningJob:
        pods = (("eu-a", "eu-a", "", 1, 8),)
        return RunningJob(
            job_id, (("eu-a", "H100", 8),), ends_in_s=36000.0, run_s=3600.0, pods=pods
        )

    def round_(capacity: float) -> RoundInput:
        return RoundInput(
            NOW,
            (cluster("us-a", 0, 2), cluster("eu-a", 0, 2)),
            (LinkState("us-a", "eu-a", capacity),),
            waiting=(gang("j", 8, priority=10, may_evict_for=frozenset({PREEMPT})),),
            running=(
                RunningJob("r", (("us-a", "H100", 16),), ends_in_s=36000.0),
                victim("v1"),
                victim("v2"),
            ),
            data={"j": reads("corpus", 1)},
            regions={"us-a": "us", "eu-a": "eu"},
        )

    options = RoundOptions(
        preemption=Rules(min_run_s=0, wait_weight=None), data=DataOptions(replicate_readers=1)
    )
    # The link has room for both: the preemptor's copy brings the corpus into eu, no replica
    # copies it there a second time.
    plan = plan_round(round_(200.0), Policy.CPSAT, options)
    assert [e.preemptor for e in plan.evictions] == ["j"]
    assert [(c.source, c.destination) for c in plan.staging["j"]] == [("us-a", "eu-a")]
    assert plan.replicas == ()
    # Room for one: the preemptor's copy, not a replica that would leave it none (and evict
    # nobody).
    plan = plan_round(round_(100.0), Policy.CPSAT, options)
    assert [e.preemptor for e in plan.evictions] == ["j"]
    assert [c.gbps for c in plan.staging["j"]] == [100.0] and plan.replicas == ()


def test_a_replica_takes_only_what_a_grow_leaves_of_a_link() -> None:
    # "e" runs 2 of its 4 units in us-a (full) and grows into eu-a, its data held in both:
    # once grown it holds 60 Gbps of us-a - eu-a; a corpus five jobs read lately (held in
    # us-a) is replicated into eu over the 40 left, not the whole link.
    request = JobRequest(
        "e", pods=4, gpus_per_pod=8, gpu_model="H100", unit_pods=1, min_units=1,
        splittable=True, max_clusters=2, allreduce_gbps=60.0,
    )  # fmt: skip
    data = RoundInput(
        NOW,
        (cluster("us-a", 0, 2), cluster("eu-a", 4)),
        (LinkState("us-a", "eu-a", 100.0),),
        elastic=(planning.ElasticRun(request, units_in=(("us-a", 2),), since_s=36000.0),),
        data={"e": DataNeeds(datasets=(DatasetNeed("other", TIB, ("us-a", "eu-a")),))},
        regions={"us-a": "us", "eu-a": "eu"},
        popularity={"corpus": Popularity(5, 27 * TIB, ("us-a",))},
    )
    plan = plan_round(data, Policy.CPSAT, ON)
    (grow,) = plan.grows
    assert grow.decision.clusters == ("eu-a",) and [b.gbps for b in grow.links] == [60.0]
    assert [(c.data, c.destination, c.gbps) for c in plan.replicas] == [("corpus", "eu-a", 40.0)]


def test_no_replica_goes_where_copies_keep_failing_nor_where_one_copy_tries_again() -> None:
    # eu-a, the region's cluster with the most free GPUs, is barred to copies, then open to
    # one copy that tries again (the probe, a job's prefetch): the replica goes to eu-b.
    readers = {"j1": "corpus", "j2": "corpus", "j3": "corpus"}
    why = "copies into it failed 3 times in a row"
    for bar in ({"no_copies_into": {"eu-a": why}}, {"probe_copies_into": {"eu-a": why}}):
        plan = plan_round(fleet(readers, **bar), Policy.CPSAT, ON)
        assert [(c.data, c.destination) for c in plan.replicas] == [("corpus", "eu-b")]
