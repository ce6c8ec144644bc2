"""A watch's inbox is bounded in changes and in bytes: a watch further behind is dropped at
once, what it held freed, and told to end (issue 38 item 5)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from volcano_global.services.kube.feed import Change, Subscription


def _change(size: int) -> Change:
    row = {"id": uuid.uuid4(), "updated_at": datetime.now(UTC), "manifest": {"x": "y" * size}}
    return Change(row, [])


async def test_a_watch_too_far_behind_in_bytes_is_dropped_and_freed() -> None:
    subscription = Subscription(max_events=1000, max_bytes=10_000)
    for _ in range(3):
        subscription.offer(_change(2_000))
    assert subscription.inbox.qsize() == 3 and subscription.ended is None
    subscription.offer(_change(8_000))  # past 10,000 bytes behind
    assert subscription.ended is not None and "kube.watch_buffer_bytes" in subscription.ended
    assert subscription.inbox.qsize() == 1 and subscription.buffered_bytes == 0
    assert await subscription.next() is None  # the watch ends
    subscription.offer(_change(10))  # nothing more is kept for it
    assert subscription.inbox.empty()


async def test_a_watch_too_far_behind_in_changes_is_dropped() -> None:
    subscription = Subscription(max_events=10, max_bytes=10**9)
    for _ in range(11):
        subscription.offer(_change(1))
    assert subscription.ended is not None and "10 changes" in subscription.ended


async def test_a_watch_that_keeps_up_keeps_its_changes() -> None:
    subscription = Subscription(max_events=2, max_bytes=10**9)
    for _ in range(10):
        subscription.offer(_change(100))
        change = await subscription.next()
        assert change is not None
    assert subscription.ended is None and subscription.buffered_bytes == 0
