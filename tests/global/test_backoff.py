"""The shared backoff: doubling from the first delay up to the cap, jittered either way, back to
the first delay after a success. Delays are computed, never slept."""

from __future__ import annotations

import random

import pytest

from volcano_global.backoff import Backoff


def delays(backoff: Backoff, n: int) -> list[float]:
    return [round(backoff.next_delay(), 6) for _ in range(n)]


def test_delays_double_up_to_the_cap_and_start_over_after_a_reset() -> None:
    backoff = Backoff(initial=0.2, cap=30.0)
    assert delays(backoff, 10) == [0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0]
    backoff.reset()
    assert delays(backoff, 3) == [0.2, 0.4, 0.8]


def test_jitter_spreads_each_delay_by_its_share_either_way() -> None:
    backoff = Backoff(initial=0.2, cap=30.0, jitter=0.5, rng=random.Random(7))
    same = random.Random(7)
    nominal = [0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0]
    got = [backoff.next_delay() for _ in nominal]
    assert got == [d * same.uniform(0.5, 1.5) for d in nominal]
    assert all(0.5 * d <= g <= 1.5 * d for g, d in zip(got, nominal, strict=True))
    assert len(set(got)) == len(got)  # not the same pause for every client


def test_a_cap_changed_between_delays_bounds_the_next_ones() -> None:
    """The agent's cap follows the heartbeat interval the Global asks for."""
    backoff = Backoff(initial=0.2, cap=5.0)
    assert delays(backoff, 6) == [0.2, 0.4, 0.8, 1.6, 3.2, 5.0]
    backoff.cap = 1.0
    assert delays(backoff, 2) == [1.0, 1.0]
    backoff.cap = 30.0
    assert delays(backoff, 2) == [2.0, 4.0]


@pytest.mark.parametrize(
    "kwargs", [{"initial": -1.0}, {"cap": -1.0}, {"factor": 0.5}, {"jitter": 1.5}]
)
def test_nonsense_parameters_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="need initial >= 0"):
        Backoff(**{"initial": 0.2, "cap": 1.0, **kwargs})
