"""A DataSource's locality grows by itself (SQLite and Postgres): `add_locality`, which the
staging work and agents' reports call, adds a cluster once (two reports at once both land),
says whether it was news, records an event, and the next read of a job's data needs sees it."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from fastapi import FastAPI
from sqlalchemy import select

from tests.data_documents import data_source, data_source_claim
from tests.factories import job_document, submit
from volcano_global.db.engine import transaction
from volcano_global.db.models import Event
from volcano_global.errors import Invalid, NotFound
from volcano_global.jobspec.data_sources import read_data_source, read_data_source_claim
from volcano_global.services.data import Presence, add_locality, add_present, data_needs
from volcano_global.services.data.claims import apply_claim
from volcano_global.services.data.sources import apply_data_source, get_data_source


async def _seed(app: FastAPI) -> None:
    async with transaction(app.state.sessions) as session:
        await apply_data_source(session, definition=read_data_source(data_source()))


async def test_a_cluster_that_gains_the_data_is_added_once(app: FastAPI) -> None:
    await _seed(app)
    async with transaction(app.state.sessions) as session:
        assert await add_locality(session, source="corpus-v3", cluster="gpu-east") is True
    async with transaction(app.state.sessions) as session:
        assert await add_locality(session, source="corpus-v3", cluster="gpu-east") is False
        assert await add_locality(session, source="corpus-v3", cluster="gpu-west") is False
    async with transaction(app.state.sessions) as session:
        row = await get_data_source(session, name="corpus-v3")
        assert row.clusters == ["gpu-west", "gpu-east"]
        events = (await session.execute(select(Event.reason, Event.message))).all()
        assert ("DataLocality", "cluster gpu-east now holds data source corpus-v3") in events


async def test_only_a_change_of_its_clusters_replaces_what_staging_added(
    app: FastAPI,
) -> None:
    # A GitOps tool applies the same file every few minutes: each apply reset the locality to
    # the document's, forgetting every copy staged since.
    await _seed(app)
    async with transaction(app.state.sessions) as session:
        assert await add_locality(session, source="corpus-v3", cluster="gpu-east") is True
    async with transaction(app.state.sessions) as session:
        _, outcome = await apply_data_source(session, definition=read_data_source(data_source()))
        assert outcome == "unchanged"
        assert (await get_data_source(session, name="corpus-v3")).clusters == [
            "gpu-west",
            "gpu-east",
        ]
    resized = data_source(size="80Ti")  # the same clusters said: what was added stays
    async with transaction(app.state.sessions) as session:
        _, outcome = await apply_data_source(session, definition=read_data_source(resized))
        assert outcome == "configured"
        row = await get_data_source(session, name="corpus-v3")
        assert row.clusters == ["gpu-west", "gpu-east"] and row.size_bytes == 80 * 2**40
    moved = data_source(size="80Ti", clusters=("gpu-north",))  # other clusters said: they hold it
    async with transaction(app.state.sessions) as session:
        _, outcome = await apply_data_source(session, definition=read_data_source(moved))
        assert outcome == "configured"
        assert (await get_data_source(session, name="corpus-v3")).clusters == ["gpu-north"]


async def test_two_reports_at_once_both_land(app: FastAPI) -> None:
    await _seed(app)

    async def report(cluster: str) -> None:
        async with transaction(app.state.sessions) as session:
            await add_locality(session, source="corpus-v3", cluster=cluster)

    await asyncio.gather(report("gpu-east"), report("gpu-central"))
    async with transaction(app.state.sessions) as session:
        row = await get_data_source(session, name="corpus-v3")
        assert sorted(row.clusters) == ["gpu-central", "gpu-east", "gpu-west"]


async def test_an_unknown_source_or_cluster_name_is_refused(app: FastAPI) -> None:
    await _seed(app)
    async with transaction(app.state.sessions) as session:
        with pytest.raises(NotFound):
            await add_locality(session, source="nope", cluster="gpu-east")
        with pytest.raises(Invalid):
            await add_locality(session, source="corpus-v3", cluster="")


async def test_the_next_read_of_needs_sees_the_new_locality(app: FastAPI, api: object) -> None:

    job = (await submit(api, job_document("train"))).json()  # type: ignore[arg-type]
    job_id = uuid.UUID(job["uid"])
    await _seed(app)
    async with transaction(app.state.sessions) as session:
        await apply_claim(session, definition=read_data_source_claim(data_source_claim()))
    async with transaction(app.state.sessions) as session:
        before = (await data_needs(session, job_ids=[job_id]))[job_id].datasets[0].clusters
        await add_locality(session, source="corpus-v3", cluster="gpu-east")
    async with transaction(app.state.sessions) as session:
        after = (await data_needs(session, job_ids=[job_id]))[job_id].datasets[0].clusters
    assert (before, after) == (("gpu-west",), ("gpu-west", "gpu-east"))


async def test_an_agents_list_adds_its_cluster_where_missing_and_skips_unknown_names(
    app: FastAPI,
) -> None:
    await _seed(app)  # corpus-v3 in gpu-west
    async with transaction(app.state.sessions) as session:
        other = data_source("ckpt-7b", clusters=("gpu-east",))
        await apply_data_source(session, definition=read_data_source(other))
    async with transaction(app.state.sessions) as session:
        done = await add_present(
            session, cluster="gpu-east", sources=["corpus-v3", "ckpt-7b", "nope", "corpus-v3"]
        )
    assert done == Presence(added=["corpus-v3"], unknown=["nope"])
    async with transaction(app.state.sessions) as session:
        again = await add_present(session, cluster="gpu-east", sources=["corpus-v3", "ckpt-7b"])
        assert again == Presence(added=[], unknown=[])
        assert (await get_data_source(session, name="corpus-v3")).clusters == [
            "gpu-west",
            "gpu-east",
        ]
