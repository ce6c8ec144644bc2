"""Prefetch in `plan_round`, by hand: a waiting job's data copied, without GPUs, to where room
comes sooner, once; never where a start of the round stages it; a preemptor's copies; a
region's margin; checkpoints each their own; the probe copy into a cluster whose copies kept
failing."""

from __future__ import annotations

from dataclasses import replace as dataclass_replace

from tests.solver_support.gravity import (
    LINK,
    NOW,
    PREFETCH,
    TIB,
    busy,
    cluster,
    gang,
    reads,
)
from volcano_global.solver import (
    ClusterCapacity,
    Leaf,
    LinkState,
    Policy,
)
from volcano_global.solver import copies as copies_
from volcano_global.solver.data import CheckpointNeed, DataNeeds
from volcano_global.solver.gravity import DataOptions, Steer, steer
from volcano_global.solver.preemption import PREEMPT
from volcano_global.solver.round_plan import RoundInput, RoundOptions, plan_round


def test_prefetch_copies_a_waiting_jobs_data_to_where_room_comes_sooner_once() -> None:
    # west (the holder) is busy for 10 h, east for 1 h: copy now to east, without GPUs.
    data = RoundInput(
        NOW,
        (cluster("east", 0, 4), cluster("west", 0, 4)),
        (LINK,),
        waiting=(gang("j", 16),),
        running=(busy("r", "west", 32, 36000.0), busy("s", "east", 32, 3600.0)),
        data={"j": reads(1, "west")},
    )
    options = RoundOptions(data=DataOptions(prefetch=True))
    plan = plan_round(data, Policy.CPSAT, options)
    assert plan.starts == ()
    (copy,) = plan.prefetch["j"]
    assert (copy.source, copy.destination, copy.gbps) == ("west", "east", 100.0)
    assert "west has room in about 10.0 h: waiting for west; copying it to east meanwhile" in (
        plan.outcomes["j"].reason
    )
    # Once on its way, it is not fetched again; without the option, never.
    again = RoundInput(**{**data.__dict__, "copying": {"corpus": ("east",)}})
    assert plan_round(again, Policy.CPSAT, options).prefetch == {}
    assert plan_round(data, Policy.CPSAT).prefetch == {}


def test_a_prefetch_is_not_made_into_a_cluster_a_start_of_the_round_stages_the_data_to() -> None:
    # As above, but east has one node free now: "k" (first in order) starts there and stages
    # the corpus west -> east; "j" waits for east's room, and its prefetch would copy the same
    # corpus into east a second time (the link has room for both).
    east = ClusterCapacity("east", (Leaf("H100", (3, 0, 0, 0, 0, 0, 0, 0, 1), ("east",), 8),))
    data = RoundInput(
        NOW,
        (east, cluster("west", 0, 4)),
        (LinkState("east", "west", 400.0),),
        waiting=(gang("k", 8, priority=60), gang("j", 16)),
        running=(busy("r", "west", 32, 36000.0), busy("s", "east", 24, 3600.0)),
        data={"k": reads(1, "west"), "j": reads(1, "west")},
    )
    plan = plan_round(data, Policy.CPSAT, RoundOptions(data=DataOptions(prefetch=True)))
    assert [d.job_id for d in plan.starts] == ["k"]
    assert [(c.data, c.destination) for c in plan.staging["k"]] == [("corpus", "east")]
    assert plan.prefetch == {}
    assert "waiting for west; its data is on its way to east (the start of k)" in (
        plan.outcomes["j"].reason
    )
    # "k" reads another dataset over a link of 100 Gbps: its copy takes all of it, and "j"
    # is told its prefetch waits for bandwidth (not that it is being copied).
    thin = dataclass_replace(
        data,
        links=(LinkState("east", "west", 100.0),),
        data={**data.data, "k": reads(1, "west", name="other")},
    )
    plan = plan_round(thin, Policy.CPSAT, RoundOptions(data=DataOptions(prefetch=True)))
    assert [d.job_id for d in plan.starts] == ["k"] and plan.prefetch == {}
    reason = plan.outcomes["j"].reason
    assert "waiting for west; copying it to east waits for bandwidth" in reason
    assert "meanwhile" not in reason


def test_with_a_margin_prefetch_prefers_a_cluster_inside_the_region() -> None:
    # west (the holder, region w) is busy for 10 h, east (region e) for 1 h, west2 (region w)
    # for 2 h; a copy of 1 TiB takes about 88 s over either link. Without a margin the data
    # goes to east, where room comes first; weighed 101 times (margin 100) the copy to east
    # counts 2.5 h, so west2 (room in 2 h) is sooner and no byte leaves the region.
    data = RoundInput(
        NOW,
        (cluster("east", 0, 4), cluster("west", 0, 4), cluster("west2", 0, 4)),
        (LINK, LinkState("west", "west2", 100.0)),
        waiting=(gang("j", 16),),
        running=(
            busy("r", "west", 32, 36000.0),
            busy("s", "east", 32, 3600.0),
            busy("t", "west2", 32, 7200.0),
        ),
        data={"j": reads(1, "west")},
        regions={"east": "e", "west": "w", "west2": "w"},
    )
    for margin, target in ((0.0, "east"), (100.0, "west2")):
        options = RoundOptions(data=DataOptions(prefetch=True, cross_region_margin=margin))
        (copy,) = plan_round(data, Policy.CPSAT, options).prefetch["j"]
        assert (copy.source, copy.destination) == ("west", target)


def test_a_job_that_may_evict_prefetches_unless_it_has_room_or_no_copy_may_go() -> None:
    # west (the holder) is full for 10 h; east has one free node (8 GPUs) of the 16 the job
    # needs, and the rest ends in 1 h. Evicting in east to stage there holds GPUs while it
    # copies: the data is copied to east meanwhile instead (8 free GPUs are not room).
    # Where no copy may go to east now (a copy failed there lately), the eviction path stays.
    job = gang("j", 16, may_evict_for=frozenset({PREEMPT})).request
    clusters = (cluster("east", 1, 3), cluster("west", 0, 4))
    running = (busy("r", "west", 32, 36000.0), busy("s", "east", 24, 3600.0))

    def steered(barred: tuple[str, ...]) -> Steer:
        _, decided = steer(
            [job],
            {"j": reads(1, "west")},
            clusters=clusters,
            links=(LINK,),
            running=running,
            options=DataOptions(prefetch=True),
            evicting=True,
            no_prefetch={"j": barred},
        )
        return decided["j"]

    fetch = steered(())
    assert (fetch.prefetch_to, fetch.allowed) == ("east", ("west",))
    evict = steered(("east",))
    assert (evict.prefetch_to, evict.allowed) == (None, ("west", "east"))


def test_two_jobs_checkpoints_are_both_prefetched_into_one_cluster() -> None:
    # Each job's checkpoint is its own, though both are named `checkpoint`: one fetched into
    # east for a does not stand for b's.
    needs = {k: DataNeeds(checkpoint=CheckpointNeed(TIB, "west")) for k in ("a", "b")}
    steered = {k: Steer(("west",), "", 100.0, "east") for k in ("a", "b")}
    out = copies_.prefetch(steered, set(), needs, (LinkState("west", "east", 400.0),), PREFETCH)
    assert {k: [(c.data, c.destination) for c in v] for k, v in out.items()} == {
        "a": [("checkpoint", "east")],
        "b": [("checkpoint", "east")],
    }


def test_a_probe_copy_goes_to_the_first_job_whose_copy_is_planned() -> None:
    # Copies into east kept failing and their backoff ended: one copy tries again. "k" starts
    # in east and its staging takes all of west -> east; "j" (first in line to be copied to
    # east) reads from west too, so no copy of its data can be planned; "m" reads from north.
    # m's copy is the probe (it was refused for j's, which was never made: no probe went);
    # j and n are told why not theirs.
    east = ClusterCapacity("east", (Leaf("H100", (3, 0, 0, 0, 0, 0, 0, 0, 1), ("east",), 8),))
    why = "copies into it failed 3 times in a row; one copy into it tries again"
    data = RoundInput(
        NOW,
        (east, cluster("west", 0, 4), cluster("north", 0, 4)),
        (LinkState("east", "west", 100.0), LinkState("east", "north", 400.0)),
        waiting=(gang("k", 8, priority=60), gang("j", 16), gang("m", 16), gang("n", 16)),
        running=(
            busy("r", "west", 32, 36000.0),
            busy("s", "east", 24, 3600.0),
            busy("t", "north", 32, 36000.0),
        ),
        data={
            "k": reads(1, "west", name="other"),
            "j": reads(1, "west"),
            "m": reads(1, "north", name="weights"),
            "n": reads(1, "north", name="tokens"),
        },
        probe_copies_into={"east": why},
    )
    options = RoundOptions(data=DataOptions(prefetch=True))
    plan = plan_round(data, Policy.CPSAT, options)
    assert [d.job_id for d in plan.starts] == ["k"]
    assert {k: [(c.data, c.destination) for c in v] for k, v in plan.prefetch.items()} == {
        "m": [("weights", "east")]
    }
    for other in ("j", "n"):  # m's copy is the one: the others wait for its end
        assert f"not copying it to east meanwhile: {why}" in plan.outcomes[other].reason
    assert "not copying" not in plan.outcomes["m"].reason
    # Without the probe, each is copied where the links let it.
    free = plan_round(dataclass_replace(data, probe_copies_into={}), Policy.CPSAT, options)
    assert sorted(free.prefetch) == ["m", "n"]


def test_a_job_that_stages_at_its_start_is_not_told_of_a_prefetch_refused_there() -> None:
    # east has room now and copies into east keep failing: the job starts in east staging
    # (a share's staging, not a prefetch), and its reason says nothing of a refused copy.
    _, decided = steer(
        [gang("j", 16).request],
        {"j": reads(1, "west")},
        clusters=(cluster("east", 4), cluster("west", 0, 4)),
        links=(LINK,),
        running=(busy("r", "west", 32, 7200.0),),
        options=DataOptions(prefetch=True),
        no_copies_into={"east": "copies into it failed 3 times in a row"},
    )
    assert decided["j"].allowed == ("west", "east")  # the holder, and where it stages
    assert "staging to east" in decided["j"].note
    assert "not copying it" not in decided["j"].note
