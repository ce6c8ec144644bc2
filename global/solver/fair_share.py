"""Fair share of the fleet's GPUs across a tree of queues, as Volcano's proportion and capacity
plugins compute a queue's share, extended to hierarchical queues. Pure.

The rule, applied from the root down (the root holds every Ready cluster's GPUs, `capacity`):
the amount A a queue deserves is divided among its children. Each child c has

    want_c  = GPUs its subtree's jobs hold or wait for (jobs live only in leaves)
    hi_c    = min(capability_c, want_c)            a ceiling: never more than it can use or may use
    lo_c    = min(max(guarantee_c, min(deserved_c, want_c)), capability_c)
              a floor: a guarantee is reserved even when unused (Volcano subtracts every
              queue's guarantee from what the others may reach); `deserved` is an entitlement
              up to what the queue wants (capacity plugin)
    x_c     = clamp(L * weight_c, lo_c, max(lo_c, hi_c))

where the water level L is the smallest that gives away A (or every child reaches its ceiling):
weighted among siblings, as proportion's loop of dividing what is left by weight until every
queue is capped. When the floors alone exceed A, A is divided in proportion to the floors.
Amounts are then made whole GPUs by largest remainder (never more than A in all).

A queue's `share` is allocated / deserved (Volcano's share; +inf when it holds GPUs it does
not deserve, 0 when it holds none): the scheduler orders siblings by it, lowest first."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from volcano_global.solver.model import QueueState

# The top of the tree: not a valid queue name, so a stored queue called "root" (the older REST
# shape allowed it) is an ordinary top-level queue rather than its own child.
ROOT = "/"


@dataclass(frozen=True)
class QueueNode:
    name: str
    parent: str | None = None  # None: a child of the root
    weight: int = 1
    capability: int | None = None  # GPUs; None: no cap
    deserved: int | None = None
    guarantee: int = 0
    held: int = 0  # GPUs its jobs hold now (leaves; a parent's is its subtree's)
    pending: int = 0  # GPUs its pending jobs ask for


@dataclass(frozen=True)
class QueueShare:
    name: str
    deserved: int  # GPUs it deserves now
    allocated: int  # GPUs its subtree holds
    wanted: int  # held + pending of its subtree
    cap: int | None  # the tightest capability on its path from the root (None: uncapped)

    @property
    def share(self) -> float:
        if self.allocated == 0:
            return 0.0
        return self.allocated / self.deserved if self.deserved else math.inf


def children_of(queues: Mapping[str, QueueNode]) -> dict[str, list[str]]:
    """Each queue's children (by name, sorted); a parent missing from `queues` counts as root,
    and so does the parent of a queue on a cycle of parents (two replicas may each accept one
    edge of it: every queue still gets a share, and nothing recurses forever)."""
    out: dict[str, list[str]] = {ROOT: []}
    for q in queues.values():
        out.setdefault(q.name, [])
    for q in sorted(queues.values(), key=lambda q: q.name):
        parent = q.parent if q.parent in queues and not _on_cycle(q.name, queues) else ROOT
        out[parent].append(q.name)
    return out


def _on_cycle(name: str, queues: Mapping[str, QueueNode]) -> bool:
    seen = set()
    at = queues[name].parent
    while at in queues and at not in seen:
        if at == name:
            return True
        seen.add(at)
        at = queues[at].parent
    return False


def fair_shares(capacity: int, queues: Mapping[str, QueueNode]) -> dict[str, QueueShare]:
    """Every queue's deserved GPUs under the rule of the module docstring."""
    kids = children_of(queues)
    held: dict[str, int] = {}
    wanted: dict[str, int] = {}

    def total(name: str) -> tuple[int, int]:
        q = queues[name]
        h, w = q.held, q.held + q.pending
        for c in kids[name]:
            ch, cw = total(c)
            h, w = h + ch, w + cw
        held[name], wanted[name] = h, w
        return h, w

    for top in kids[ROOT]:
        total(top)
    out: dict[str, QueueShare] = {}

    def divide(parent: str, amount: int, cap: int | None) -> None:
        names = kids[parent]
        if not names:
            return
        amounts = _water_fill(amount, [queues[n] for n in names], wanted)
        for name, given in zip(names, amounts, strict=True):
            own = queues[name].capability
            path_cap = own if cap is None else (cap if own is None else min(cap, own))
            out[name] = QueueShare(name, given, held[name], wanted[name], path_cap)
            divide(name, given, path_cap)

    divide(ROOT, max(capacity, 0), None)
    return out


def _water_fill(amount: int, nodes: list[QueueNode], wanted: Mapping[str, int]) -> list[int]:
    lo, hi, weight = [], [], []
    for q in nodes:
        cap = q.capability if q.capability is not None else math.inf
        want = wanted[q.name]
        floor = max(q.guarantee, min(q.deserved or 0, want))
        lo.append(float(min(floor, cap)))
        hi.append(max(float(min(cap, want)), lo[-1]))
        weight.append(float(max(q.weight, 1)))
    if sum(lo) >= amount:
        scale = amount / sum(lo) if sum(lo) else 0.0
        return _whole([v * scale for v in lo], amount)
    if sum(hi) <= amount:
        return _whole(hi, amount)

    def given(level: float) -> float:
        return sum(min(max(level * w, a), b) for w, a, b in zip(weight, lo, hi, strict=True))

    # The level where the sum crosses `amount` lies between two breakpoints (a/w or b/w):
    # between them the sum is linear in the level.
    points = sorted(
        {
            0.0,
            *(a / w for a, w in zip(lo, weight, strict=True)),
            *(b / w for b, w in zip(hi, weight, strict=True)),
        }
    )
    low = 0.0
    for point in points:
        if given(point) >= amount:
            high = point
            break
        low = point
    else:  # unreachable: sum(hi) > amount
        high = points[-1]
    g_low, g_high = given(low), given(high)
    level = high if g_high == g_low else low + (amount - g_low) * (high - low) / (g_high - g_low)
    return _whole(
        [min(max(level * w, a), b) for w, a, b in zip(weight, lo, hi, strict=True)], amount
    )


def _whole(values: list[float], amount: int) -> list[int]:
    """Whole GPUs by largest remainder, at most `amount` in all (ties to the earlier name)."""
    floors = [math.floor(v + 1e-9) for v in values]
    left = min(amount, round(sum(values))) - sum(floors)
    order = sorted(range(len(values)), key=lambda i: (-(values[i] - floors[i]), i))
    for i in order[: max(left, 0)]:
        floors[i] += 1
    return floors


def subtree_rooms(
    shares: Mapping[str, QueueShare], queues: Mapping[str, QueueNode], leaves_waiting: set[str]
) -> dict[str, int | None]:
    """The GPUs each leaf queue may still take this round without any queue on its path going
    over its capability: a capped queue's room (capability - allocated) is divided among the
    leaves below it that have jobs waiting, in proportion to their weight, so that leaves
    admitted in the same round cannot together pass their parent's cap. None: no cap."""
    kids = children_of(queues)
    rooms: dict[str, int | None] = {}

    def walk(name: str, room: float | None) -> None:
        q = queues[name]
        if q.capability is not None:
            own = max(q.capability - shares[name].allocated, 0)
            room = own if room is None else min(room, own)
        if not kids[name]:
            rooms[name] = None if room is None else math.floor(room + 1e-9)
            return
        below = {c: _waiting_weight(c, kids, queues, leaves_waiting) for c in kids[name]}
        total = sum(below.values())
        for c in kids[name]:
            part = None if room is None else (room * below[c] / total if total else 0.0)
            walk(c, part)

    for top in kids[ROOT]:
        walk(top, None)
    return rooms


def _waiting_weight(
    name: str, kids: Mapping[str, list[str]], queues: Mapping[str, QueueNode], waiting: set[str]
) -> float:
    if not kids[name]:
        return float(max(queues[name].weight, 1)) if name in waiting else 0.0
    inner = [_waiting_weight(c, kids, queues, waiting) for c in kids[name]]
    return float(max(queues[name].weight, 1)) if any(inner) else 0.0


def quota_states(
    queues: Mapping[str, QueueNode], leaves_waiting: set[str]
) -> tuple[QueueState, ...]:
    """The solver's quota input: per leaf queue, what it holds and the most it may hold after
    this round (what it holds plus its `subtree_rooms` room; None where nothing caps it). The
    server's snapshot and the simulator both build their quotas with this."""
    shares = fair_shares(0, queues)  # only what each subtree holds is read
    rooms = subtree_rooms(shares, queues, leaves_waiting)
    return tuple(
        QueueState(name, None if room is None else queues[name].held + room, queues[name].held)
        for name, room in sorted(rooms.items())
    )
