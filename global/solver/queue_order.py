"""Queue order of pending jobs: priority first; within a priority, weighted fair share between
queues (the queue whose GPUs held, counting the jobs already ordered ahead, are smallest
relative to its weight goes next, as Volcano's proportion plugin divides by weight); within a
queue, submission time - or, `by_service` (the planned policies), the jobs owed a reservation
(`due`, by submission time) and then the least expected service first (`durations`), which
serves short work first while the reservations bound how long long work can wait.

With a queue tree (`tree`, hierarchical Volcano queues) the fair share is taken level by level,
as Volcano's capacity plugin compares two queues by their ancestors below the nearest common
one: a queue's key is, from its top-level ancestor down to itself, each level's (at or above its
floor - guarantee or deserved -, GPUs held and taken in its subtree / weight). A queue under its
floor goes before any at or above theirs.

Time-sharing (`timesharing`): within a queue and a priority, a job of a time-sharing queue that
has already received GPU-time (`Candidate.level`, its attained GPU-seconds: it was demoted or
evicted) goes after every job that received less, least served first. The fair share between
queues still picks the queue first: a queue under its share is not starved behind another
queue's new work because its next job was demoted once."""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from volcano_global.solver.fair_share import QueueNode


@dataclass(frozen=True)
class Candidate:
    key: str
    queue: str
    priority: int
    gpus: int
    submitted_at: datetime
    service: float = 0.0  # expected GPU-seconds (`durations.DurationModel.service`)
    due: bool = False  # waited long enough to be owed a reservation
    level: float = 0.0  # GPU-seconds received, for a job of a time-sharing queue (else 0)


def fair_order(
    jobs: list[Candidate],
    *,
    held: dict[str, int],
    weights: dict[str, int],
    by_service: bool = False,
    tree: Mapping[str, QueueNode] | None = None,
) -> list[Candidate]:
    def within(job: Candidate) -> tuple[object, ...]:
        if by_service and not job.due:
            return (job.level, 1, job.service, job.submitted_at, job.key)
        return (job.level, 0, 0.0, job.submitted_at, job.key)

    ordered: list[Candidate] = []
    taken: dict[str, int] = defaultdict(int)
    if tree:  # a parent holds what its subtree holds
        sub: dict[str, int] = defaultdict(int)
        for name, gpus in held.items():
            for above in _path(name, tree):
                sub[above] += gpus
        held = dict(sub)
    classes: dict[int, list[Candidate]] = defaultdict(list)
    for job in jobs:  # the highest priority first
        classes[-job.priority].append(job)
    for key in sorted(classes):
        queues: dict[str, deque[Candidate]] = defaultdict(deque)
        for job in sorted(classes[key], key=within):
            queues[job.queue].append(job)
        ordered += _pick(queues, held, taken, weights, tree)
    return ordered


def _pick(
    queues: dict[str, deque[Candidate]],
    held: Mapping[str, int],
    taken: dict[str, int],
    weights: Mapping[str, int],
    tree: Mapping[str, QueueNode] | None,
) -> list[Candidate]:
    """One priority class's jobs, each time from the queue least into its share. A pick
    moves only the shares of the queues under the picked one's path, so only theirs are
    worked out again (a line of 10,000 jobs in a few queues is ordered every round)."""

    def share(q: str) -> tuple[object, ...]:
        if tree:
            return _tree_share(q, queues, held, taken, tree)
        return _share(q, queues, held, taken, weights)

    paths = {q: _path(q, tree) if tree else [q] for q in queues}
    under: dict[str, list[str]] = defaultdict(list)
    for q, path in paths.items():
        for name in path:
            under[name].append(q)
    keys = {q: share(q) for q in queues}
    ordered: list[Candidate] = []
    while keys:
        queue = min(keys, key=keys.__getitem__)
        job = queues[queue].popleft()
        ordered.append(job)
        for name in paths[queue]:
            taken[name] += max(job.gpus, 1)
        if not queues[queue]:
            del queues[queue], keys[queue]
        moved = {q for name in paths[queue] for q in under[name]}
        for q in moved & keys.keys():
            keys[q] = share(q)
    return ordered


def _share(
    queue: str,
    queues: dict[str, deque[Candidate]],
    held: dict[str, int],
    taken: dict[str, int],
    weights: dict[str, int],
) -> tuple[float, datetime, str]:
    """How far the queue is into its share (lower goes first); ties by the oldest head job."""
    load = (held.get(queue, 0) + taken[queue]) / max(weights.get(queue, 1), 1)
    return load, queues[queue][0].submitted_at, queue


def _path(queue: str, tree: Mapping[str, QueueNode]) -> list[str]:
    """The queue's ancestors from the top level down, then itself (a name not in the tree:
    itself alone)."""
    path, seen = [], set()
    name: str | None = queue
    while name is not None and name not in seen:
        seen.add(name)
        path.append(name)
        name = tree[name].parent if name in tree else None
        if name is not None and name not in tree:
            break
    return path[::-1]


def _tree_share(
    queue: str,
    queues: dict[str, deque[Candidate]],
    held: dict[str, int],
    taken: dict[str, int],
    tree: Mapping[str, QueueNode],
) -> tuple[object, ...]:
    """`held` and `taken` count a parent's subtree (`taken` is charged along the path)."""
    levels = []
    for name in _path(queue, tree):
        node = tree.get(name, QueueNode(name))
        used = held.get(name, 0) + taken[name]
        floor = max(node.guarantee, node.deserved or 0)
        levels.append((used >= floor if floor else True, used / max(node.weight, 1)))
    return tuple(levels), queues[queue][0].submitted_at, queue
