"""Copies that belong to no share, over an agent's stream (docs/data.md, "Prefetch while
waiting"): the copies its cluster must run or stop, sent on every new stream and whenever a
commit writes one (no acknowledgement: the copy's row is the state, and a copy is sent again
on each stream until its agent reports its end), and the agent's reports on them. An agent
from before copies (its Hello lacks `data_copies`) cannot run them: they fail, with why."""

from __future__ import annotations

import logging
import uuid

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from volcano_global.db.engine import reading, transaction
from volcano_global.db.models import CopyState
from volcano_global.rpc.copies import CopyStatus, DataCopyCancellation
from volcano_global.rpc.v1 import agent_pb2 as pb
from volcano_global.services.data import copies

log = logging.getLogger(__name__)
OLD_AGENT = "the cluster's agent is from before copies without a share (upgrade it)"


async def due(
    sessions: async_sessionmaker[AsyncSession],
    *,
    cluster_id: uuid.UUID,
    sent: set[tuple[uuid.UUID, bool]],
    runs_copies: bool,
) -> list[pb.GlobalMessage]:
    """The copy messages this stream has not sent yet (`sent`: copy id, whether a stop)."""
    async with reading(sessions) as session:
        rows = await copies.to_send(session, cluster_id=cluster_id)
        names = await copies.job_names(session, rows)
    if rows and not runs_copies:
        async with transaction(sessions) as session:
            await copies.fail_copies(session, cluster_id=cluster_id, reason=OLD_AGENT)
        return []
    out = []
    for row in rows:
        stop = row.state is CopyState.STOPPING
        if (row.id, stop) in sent:
            continue
        sent.add((row.id, stop))
        if stop:
            cancel = DataCopyCancellation(copy_id=str(row.id), reason=row.reason)
            out.append(pb.GlobalMessage(copy_cancellation=cancel.to_proto()))
        else:
            name = names.get(row.job_id, "") if row.job_id is not None else ""
            out.append(pb.GlobalMessage(copy=copies.assignment(row, job_name=name).to_proto()))
    return out


async def record_report(
    sessions: async_sessionmaker[AsyncSession], *, cluster_id: uuid.UUID, message: pb.DataCopyReport
) -> list[pb.GlobalMessage]:
    status = CopyStatus.from_proto(message)  # validated before anything is applied
    async with transaction(sessions) as session:
        copy = await copies.apply_report(session, cluster_id=cluster_id, status=status)
    if copy is not None and status.phase.ended:
        log.info("copy %s of %s ended: %s", copy.id, copy.data_source, copy.state.value)
    return []
