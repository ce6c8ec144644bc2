"""`preempt` decides on random rounds what it decided before its trials reused the fleet's
pools (`FreePools`): the same evictions, victims, placements and reasons. The expected
decisions were written by the code of e65549c, which rebuilt every cluster's pool for every
candidate victim set (tests/preemption_rounds.py generates the rounds)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.preemption_rounds import decisions, round_of
from volcano_global.solver.preemption import preempt

EXPECTED = Path(__file__).resolve().parents[2] / "solver_support" / "preemption_decisions.json"


def test_the_same_decisions_as_rebuilding_the_pools_for_every_trial() -> None:
    expected = json.loads(EXPECTED.read_text())
    evicting = 0
    for seed, want in expected.items():
        snapshot, decision, rules, queues = round_of(int(seed))
        got = decisions(preempt(snapshot, decision, rules=rules, queues=queues))
        assert json.loads(json.dumps(got)) == want, seed
        evicting += bool(want)
    assert evicting >= 50  # the rounds exercise evictions, not only "no victim set found"
