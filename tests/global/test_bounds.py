"""The bounds on every quantity: one place, the README's table in step with it, and each
refused where it enters with the field named."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from volcano_global import bounds

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_lists_every_bound_as_it_is() -> None:
    text = README.read_text()
    for bound in bounds.ALL:
        assert f"| {bound.name} | {bound.describe()} |" in text, bound.name


@pytest.mark.parametrize(
    ("value", "why"),
    [
        (float("nan"), "must be a finite number in [0, 1024]"),
        (float("inf"), "must be a finite number in [0, 1024]"),
        (1025, "must be in [0, 1024] devices, got 1025"),
        (-1, "must be in [0, 1024] devices, got -1"),
    ],
)
def test_a_value_out_of_range_says_the_range(value: float, why: str) -> None:
    assert bounds.GPUS_PER_POD.check(value) == why
    assert bounds.GPUS_PER_POD.check(1024) is None


def test_times_need_a_zone_and_a_sane_year() -> None:
    assert bounds.in_time(datetime(2030, 1, 1, 2, tzinfo=timezone(timedelta(hours=2)))) == (
        datetime(2030, 1, 1, tzinfo=UTC)
    )
    for value in (
        datetime(2030, 1, 1),
        datetime(9999, 12, 31, 23, 59, tzinfo=timezone(-timedelta(hours=23, minutes=59))),
        datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=23))),
        datetime(1999, 12, 31, tzinfo=UTC),
    ):
        with pytest.raises(ValueError):
            bounds.in_time(value)
