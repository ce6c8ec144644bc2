import pytest

from volcano_global.db.parts import parts


def test_items_come_in_order_a_size_at_a_time_the_last_part_shorter() -> None:
    assert list(parts([1, 2, 3, 4, 5], 2)) == [[1, 2], [3, 4], [5]]
    assert list(parts("abcdef", 3)) == ["abc", "def"]


def test_nothing_gives_no_part() -> None:
    assert list(parts([], 100)) == []


def test_a_part_holds_at_least_one_item() -> None:
    with pytest.raises(ValueError, match="at least one item"):
        parts([1], 0)
