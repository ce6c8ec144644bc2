"""An agent's `DataPresence` (the data sources its cluster holds, docs/data.md): validated,
then the cluster added to each one's locality in one transaction. Not acknowledged: the agent
repeats the full list on every stream and periodically, so a message lost with a stream or a
restart of the Global is sent again."""

from __future__ import annotations

import logging

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from volcano_global.db.engine import transaction
from volcano_global.rpc.data import DataPresence
from volcano_global.rpc.v1 import agent_pb2 as pb
from volcano_global.services.data import add_present

log = logging.getLogger(__name__)


async def record_presence(
    sessions: async_sessionmaker[AsyncSession], *, cluster_name: str, message: pb.DataPresence
) -> list[pb.GlobalMessage]:
    presence = DataPresence.from_proto(message)  # validated before anything is applied
    if not presence.sources:
        return []
    async with transaction(sessions) as session:
        done = await add_present(session, cluster=cluster_name, sources=presence.sources)
    if done.added:
        log.info("%s holds data sources %s: added to their locality", cluster_name, done.added)
    if done.unknown:
        # Repeated with every full list: said at info on a new stream only.
        level = logging.INFO if presence.reason in ("connect", "added") else logging.DEBUG
        log.log(
            level,
            "%s reports data %s that no DataSource names: skipped (%s)",
            cluster_name,
            done.unknown,
            presence.reason or "?",
        )
    return []
