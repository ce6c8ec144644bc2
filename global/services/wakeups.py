"""Commits that may let a job run without a submission: a placement ended (its GPUs not yet
used by pods and its link bandwidth are free at once), an inventory shows GPUs freed, a
queue's quota or share changed. They wake the scheduling loop, which otherwise waits for its
period, and end its idling (`scheduler/loop.py`): in this process when the transaction
commits, in others through Postgres NOTIFY where they listen (`db/notifications.py`)."""

from __future__ import annotations

import uuid

from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.notifications import Channel

ROUNDS = Channel("vglobal_rounds")
FLEET = uuid.UUID(int=0)  # the one key: the loop watches the whole fleet
# Wakes a cluster's agent stream: dispatch messages were written for the cluster
# (services/lifecycle/outbox.py), or its token was rotated, the cluster deleted or a newer
# stream took it over (services/inventory/agent_streams.py). Defined here, below both.
OUTBOX = Channel("vglobal_outbox")


def room_may_have_changed(session: AsyncSession) -> None:
    """The session's transaction may let a waiting job be placed or a narrow one grow."""
    ROUNDS.wrote(session, [FLEET])
