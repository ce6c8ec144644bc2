"""Clusters for the heartbeat writer's tests: registered and Ready, and when each was heard."""

from __future__ import annotations

import uuid
from datetime import datetime

from fastapi import FastAPI
from sqlalchemy import select

from volcano_global.db.engine import transaction
from volcano_global.db.models import Cluster, ClusterState
from volcano_global.services.inventory.clusters import register_cluster


async def register_ready(app: FastAPI, *names: str) -> dict[str, uuid.UUID]:
    async with transaction(app.state.sessions) as session:
        clusters = [
            (await register_cluster(session, name=name, description="", labels={}))[0]
            for name in names
        ]
        for cluster in clusters:
            cluster.state = ClusterState.READY
        await session.flush()
        return {cluster.name: cluster.id for cluster in clusters}


async def heard(app: FastAPI) -> dict[str, tuple[ClusterState, datetime | None]]:
    async with transaction(app.state.sessions) as session:
        rows = await session.execute(select(Cluster.name, Cluster.state, Cluster.last_heartbeat_at))
        return {name: (state, at) for name, state, at in rows}
