"""Streams read the outbox at once after this process commits new messages: the signal moves
on commit only, never on a rollback."""

from __future__ import annotations

import uuid

from fastapi import FastAPI

from volcano_global.db.models import Placement
from volcano_global.services import outbox


async def test_the_signal_moves_on_commit_not_on_rollback(app: FastAPI) -> None:
    placement = Placement(id=uuid.uuid4(), shares=[])
    before = outbox.written()
    async with app.state.sessions() as session:
        await outbox.enqueue_cancellations(session, placement=placement, reason="test")
        await session.rollback()
    assert outbox.written() == before
    async with app.state.sessions() as session:
        await outbox.enqueue_cancellations(session, placement=placement, reason="test")
        assert outbox.written() == before  # not yet committed
        await session.commit()
    assert outbox.written() == before + 1
    async with app.state.sessions() as session:
        await session.commit()  # a commit that enqueued nothing
    assert outbox.written() == before + 1
