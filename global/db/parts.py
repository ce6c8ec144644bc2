"""A long list cut into parts of a statement's size: a part per statement keeps each under the
drivers' bind-parameter limits, or keeps the rows one statement buffers (and validates, with
nothing to await) few enough that the event loop is not held for all of them."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")


def parts(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    """`items` in order, `size` at a time (the last part may be shorter; none if empty)."""
    if size < 1:  # said at the call, not at the first part
        raise ValueError(f"a part holds at least one item, not {size}")
    return (items[start : start + size] for start in range(0, len(items), size))
