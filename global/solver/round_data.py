"""The data steps of a round (`round_plan.plan_round`): 6b, the starts' copies and the
copies fetched for waiting jobs (`staging`); 7b, a preemptor's copies or no eviction
(`preemptor_copies`); 7d, last, the copies of popular datasets ahead of demand on what
everything else left (`replicas`; `replication.py`); and the outcomes' words for what the
data decided (`with_data`). Step 1b, where a job may start given its data, is
`gravity.steer`."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from volcano_global.solver import copies as copies_
from volcano_global.solver import gravity, replication
from volcano_global.solver.copies import Copy
from volcano_global.solver.data import CHECKPOINT, DataNeeds, items
from volcano_global.solver.model import Decision, JobDecision, LinkState, link_key
from volcano_global.solver.outcomes import Outcome, Status
from volcano_global.solver.preemption import Eviction

if TYPE_CHECKING:
    from volcano_global.solver.round_plan import Grow, RoundInput, RoundOptions


@dataclass(frozen=True)
class _Staged:
    """What step 6b leaves: the decision less the starts that cannot stage now, the starts,
    their copies, the copies fetched for waiting jobs, the links with all of it held, and
    step 1b's word per job true to the prefetches made."""

    decision: Decision
    starts: tuple[JobDecision, ...]
    links: tuple[LinkState, ...]
    steered: Mapping[str, gravity.Steer]
    copies: dict[str, tuple[Copy, ...]] = field(default_factory=dict)
    fetches: dict[str, tuple[Copy, ...]] = field(default_factory=dict)

    @property
    def bound(self) -> dict[tuple[str, str], str]:
        """(data, destination) of the round's copies so far, with what each is."""
        return copies_.bound_by(self.copies, "the start of") | copies_.bound_by(
            self.fetches, "a prefetch for"
        )


def staging(
    data: RoundInput,
    decision: Decision,
    growing: set[str],
    steered: Mapping[str, gravity.Steer],
    options: RoundOptions,
) -> _Staged:
    """Step 6b: the starts' copies on the links the starts leave (a start that cannot stage
    now is no start: it waits, with the reason, in the decision the later steps read), and
    the copies fetched for waiting jobs (`DataOptions.prefetch`) on what is left."""
    starts = tuple(d for d in decision.jobs if d.admitted and d.job_id not in growing)
    links = _after(data.links, starts)
    if not data.data:
        return _Staged(decision, starts, links, steered)
    copies, refused = copies_.stage(
        starts, data.data, links, options.data, steered, data.copying, data.regions
    )
    if refused:
        jobs = tuple(
            JobDecision(d.job_id, False, reason=refused[d.job_id]) if d.job_id in refused else d
            for d in decision.jobs
        )
        decision = replace(decision, jobs=jobs)
        starts = tuple(d for d in starts if d.job_id not in refused)
        links = _after(data.links, starts)
    links = copies_.reserved(links, copies, options.data)
    bound = copies_.bound_earlier(data.copying) | copies_.bound_by(copies, "the start of")
    probes = data.probe_copies_into
    fetches = copies_.prefetch(
        steered,
        {d.job_id for d in starts},
        data.data,
        links,
        options.data,
        data.regions,
        bound,
        probes,
    )
    links = copies_.reserved(links, fetches, options.data)
    steered = _unfetched(steered, fetches, data.data, bound, probes)
    return _Staged(decision, starts, links, steered, copies, fetches)


def _unfetched(
    steered: Mapping[str, gravity.Steer],
    fetches: Mapping[str, tuple[Copy, ...]],
    needs: Mapping[str, DataNeeds],
    bound: Mapping[tuple[str, str], str],
    probes: Mapping[str, str],
) -> dict[str, gravity.Steer]:
    """The waiting jobs' notes, true to the prefetches made: one step 1b chose to fetch for
    and that got no copy is told why (a copy of the round already brings its data there,
    another job's copy is the one that tries again where copies kept failing (`probes`), or
    no link had the bandwidth left)."""
    out = dict(steered)
    probed = {c.destination for group in fetches.values() for c in group} & set(probes)
    for job_id, s in steered.items():
        target = s.prefetch_to
        if target is None or job_id in fetches:
            continue
        note = s.note.removesuffix(f"; copying it to {target} meanwhile")
        ways = [bound.get((i.name, target)) for i in items(needs[job_id]) if i.name != CHECKPOINT]
        if ways and all(ways):
            said = f"its data is on its way to {target} ({', '.join(sorted(set(ways)))})"
        elif target in probed:
            said = f"not copying it to {target} meanwhile: {probes[target]}"
        else:
            said = f"copying it to {target} waits for bandwidth"
        out[job_id] = replace(s, prefetch_to=None, note=f"{note}; {said}")
    return out


def replicas(
    data: RoundInput,
    staged: _Staged,
    grows: Sequence[Grow],
    evictions: Sequence[Eviction],
    preempting: Mapping[str, tuple[Copy, ...]],
    options: RoundOptions,
) -> tuple[Copy, ...]:
    """Step 7d, last (`replication.replicate`), counting the waiting readers and the
    caller's: on what the starts, their copies, the prefetches, the grows, the evictions'
    placements and the preemptors' copies leave of the links (a replica never takes what a
    job of the round needs), and with the round's own copies as data on its way."""
    if options.data.replicate_readers <= 0 or not data.data:
        return ()
    links = _after(staged.links, tuple(e.placement for e in evictions))
    links = copies_.reserved(_grown(links, grows, data), preempting, options.data)
    waiting = (w.request.id for w in data.waiting)
    popular = replication.popularity(data.data, waiting, data.popularity)
    bound: dict[str, set[str]] = defaultdict(set)
    for name, where in data.copying.items():
        bound[name].update(where)
    for group in (*staged.copies.values(), *staged.fetches.values(), *preempting.values()):
        for c in group:
            bound[c.data].add(c.destination)
    in_flight = {name: tuple(sorted(where)) for name, where in bound.items()}
    # Where copies keep failing (any copy's), where one copy tries again whether they still
    # do (a replica is not that copy), or a replica of the dataset failed lately.
    closed = set(data.no_copies_into) | set(data.probe_copies_into)
    barred = {name: closed | set(data.no_replicas.get(name, ())) for name in popular}
    return replication.replicate(
        popular, data.clusters, links, options.data, data.regions, in_flight, barred
    )


def _grown(
    links: tuple[LinkState, ...], grows: Sequence[Grow], data: RoundInput
) -> tuple[LinkState, ...]:
    """The links with what each grow reserves beyond what its job holds now (a pair it
    holds less on once grown is not counted free before the grow runs)."""
    held = {run.request.id: run.links for run in data.elastic}
    more: dict[tuple[str, str], float] = defaultdict(float)
    for g in grows:
        before: dict[tuple[str, str], float] = defaultdict(float)
        for b in held.get(g.job_id, ()):
            before[link_key(b.a, b.b)] += b.gbps
        for b in g.links:
            more[link_key(b.a, b.b)] += max(b.gbps - before[link_key(b.a, b.b)], 0.0)
    return tuple(replace(x, reserved_gbps=x.reserved_gbps + more[x.key]) for x in links)


def preemptor_copies(
    data: RoundInput,
    evictions: list[Eviction],
    held: tuple[LinkState, ...],
    steered: Mapping[str, gravity.Steer],
    options: RoundOptions,
    planned: Mapping[tuple[str, str], str],
) -> tuple[list[Eviction], dict[str, tuple[Copy, ...]], dict[str, str]]:
    """Step 7b: the copies a preemptor needs where it will start, on what the round's starts,
    copies, grows and the preemptors' own splits leave of the links; an eviction whose
    preemptor cannot stage now is not made (the victims keep running), and why is returned.
    `planned`: (data, destination) of the round's copies so far (staging, prefetch), as
    earlier rounds' copies (`RoundInput.copying`): never copied there twice."""
    if not data.data or not evictions:
        return evictions, {}, {}
    placements = tuple(e.placement for e in evictions)
    links = _after(held, placements)
    more, refused = copies_.stage(
        placements, data.data, links, options.data, steered, data.copying, data.regions, planned
    )
    return [e for e in evictions if e.preemptor not in refused], more, refused


def with_data(
    outcomes: dict[str, Outcome],
    steered: Mapping[str, gravity.Steer],
    copies: Mapping[str, tuple[Copy, ...]],
    now: datetime,
    unevicted: Mapping[str, str],
) -> dict[str, Outcome]:
    """The outcomes with what the data decided, in numbers: the copies a start waits for,
    why a waiting job waits where its data is, and why one that would evict did not."""
    for job_id, why in unevicted.items():
        o = outcomes[job_id]
        outcomes[job_id] = replace(o, reason=f"{o.reason}; it would evict, but {why}")
    for job_id, group in copies.items():
        o = outcomes[job_id]
        outcomes[job_id] = replace(o, reason=f"{o.reason}; {copies_.started_note(group)}")
    for job_id, s in steered.items():
        o = outcomes.get(job_id)
        if o is None or o.status is not Status.WAITING:
            continue
        at = o.at or (
            now + timedelta(seconds=s.wait_s) if s.wait_s and math.isfinite(s.wait_s) else None
        )
        outcomes[job_id] = replace(o, reason=f"{s.note}; {o.reason}", at=at)
    return outcomes


def _after(links: tuple[LinkState, ...], starts: tuple[JobDecision, ...]) -> tuple[LinkState, ...]:
    """The links with what the round's starts reserve on them."""
    more: dict[tuple[str, str], float] = defaultdict(float)
    for d in starts:
        for r in d.reservations:
            more[link_key(r.a, r.b)] += r.gbps
    return tuple(replace(x, reserved_gbps=x.reserved_gbps + more[x.key]) for x in links)
