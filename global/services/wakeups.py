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


def stream_standing(cluster_id: uuid.UUID) -> uuid.UUID:
    """The OUTBOX key of a change to the standing of the cluster's agent stream (its token
    rotated, the cluster deleted, a newer stream), written beside the cluster's own key: the
    stream's guard watches this one alone, so the dispatch messages written for the cluster
    (its own key, a wake-up per round that places there) do not make it re-read its standing
    from the database. The same in every process (a name-based UUID)."""
    return uuid.uuid5(cluster_id, "agent-stream-standing")


def room_may_have_changed(session: AsyncSession) -> None:
    """The session's transaction may let a waiting job be placed or a narrow one grow."""
    ROUNDS.wrote(session, [FLEET])
