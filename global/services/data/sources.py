"""DataSources as the Global keeps them: applied as Volcano Global publishes them (created,
replaced or unchanged), read, deleted, and their locality grown by what happens in the
clusters (a staging that completed, an agent that found the data in its cluster)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.models import Cluster, DataSourceRow
from volcano_global.errors import Conflict, Invalid, NotFound
from volcano_global.jobspec.data_sources import URI, DataSourceDefinition
from volcano_global.services.events import record_event
from volcano_global.services.wakeups import room_may_have_changed

Outcome = Literal["created", "configured", "unchanged"]


async def find_data_source(session: AsyncSession, *, name: str) -> DataSourceRow | None:
    found = await session.execute(select(DataSourceRow).where(DataSourceRow.name == name))
    return found.scalar_one_or_none()


async def get_data_source(session: AsyncSession, *, name: str) -> DataSourceRow:
    row = await find_data_source(session, name=name)
    if row is None:
        raise NotFound(f'datasources.datadependency.volcano.sh "{name}" not found')
    return row


async def list_data_sources(session: AsyncSession) -> list[DataSourceRow]:
    rows = await session.execute(select(DataSourceRow).order_by(DataSourceRow.name))
    return list(rows.scalars())


async def apply_data_source(
    session: AsyncSession, *, definition: DataSourceDefinition, create_only: bool = False
) -> tuple[DataSourceRow, Outcome]:
    """Create the DataSource, or replace it by the document (`configured`), or leave it
    (`unchanged`: the document is the one last applied). A document whose `clusterNames`
    differ from the last applied one's sets the locality to them (whoever changes where a
    DataSource is says where it is); otherwise the clusters staging and agents added stay (a
    GitOps tool's re-sync, a label patched, the size corrected)."""
    row = await find_data_source(session, name=definition.name)
    if row is not None and create_only:
        raise Conflict(f'datasources.datadependency.volcano.sh "{definition.name}" already exists')
    if row is not None and _same(row, definition):
        return row, "unchanged"
    outcome: Outcome = "configured" if row is not None else "created"
    if row is None or _declared(row.document) != list(definition.clusters):
        row = row or _new_row(session, definition.name)
        row.clusters = list(definition.clusters)
    row.system, row.type = definition.system, definition.type
    row.source_name = definition.source_name
    row.size_bytes = definition.size_bytes
    row.document = definition.document
    room_may_have_changed(session)
    await session.flush()
    return row, outcome


def _same(row: DataSourceRow, definition: DataSourceDefinition) -> bool:
    return bool(row.document == definition.document)


def _new_row(session: AsyncSession, name: str) -> DataSourceRow:
    row = DataSourceRow(name=name)
    session.add(row)
    return row


def _declared(document: dict[str, Any]) -> list[str]:
    """The clusters a stored (checked) document says hold the data, as its definition lists
    them (in order, without repeats)."""
    return list(dict.fromkeys(document["spec"]["locality"]["clusterNames"]))


async def delete_data_source(session: AsyncSession, *, name: str) -> DataSourceRow:
    row = await get_data_source(session, name=name)
    await session.delete(row)
    await session.flush()
    return row


async def source_uris(session: AsyncSession, *, names: Collection[str]) -> dict[str, str]:
    """Where each named DataSource's bytes are, for the copies that stage it: its
    `spec.attributes.uri` (`s3://corpora/v3/*`), when its document says (docs/staging.md)."""
    if not names:
        return {}
    rows = await session.execute(
        select(DataSourceRow.name, DataSourceRow.document).where(
            DataSourceRow.name.in_(list(names))
        )
    )
    found = {}
    for name, document in rows:
        uri = ((document.get("spec") or {}).get("attributes") or {}).get(URI)
        if isinstance(uri, str) and uri:
            found[name] = uri
    return found


async def add_locality(session: AsyncSession, *, source: str, cluster: str) -> bool:
    """Cluster `cluster` now holds DataSource `source` (its staging completed, or its agent
    found the data there: docs/data.md). Returns whether that is news; the row is locked so
    that two reports at once both land. Raises NotFound for an unknown source and Invalid for
    a cluster name no cluster could have."""
    if not cluster or len(cluster) > 63:
        raise Invalid.one("cluster", "must be a cluster name (1 to 63 characters)")
    found = await session.execute(
        select(DataSourceRow).where(DataSourceRow.name == source).with_for_update()
    )
    row = found.scalar_one_or_none()
    if row is None:
        raise NotFound(f'datasources.datadependency.volcano.sh "{source}" not found')
    if cluster in row.clusters:
        return False
    row.clusters = [*row.clusters, cluster]  # a new list: the JSON column sees the change
    member = await session.scalar(select(Cluster.id).where(Cluster.name == cluster))
    await record_event(
        session,
        reason="DataLocality",
        message=f"cluster {cluster} now holds data source {source}",
        cluster_id=member,
        fold=False,
    )
    room_may_have_changed(session)
    await session.flush()
    return True


@dataclass(frozen=True)
class Presence:
    """What an agent's report of data in its cluster changed: the sources whose locality
    gained the cluster, and the names no DataSource has (skipped)."""

    added: list[str]
    unknown: list[str]


async def add_present(session: AsyncSession, *, cluster: str, sources: Sequence[str]) -> Presence:
    """Cluster `cluster` holds each of `sources` (its agent found them: docs/data.md, "Agent
    label convention"): `add_locality` for each one whose locality lacks it. One read first, so
    that the full list an agent repeats on every stream locks no row that already has it."""
    wanted = sorted(set(sources))
    rows = await session.execute(
        select(DataSourceRow.name, DataSourceRow.clusters).where(DataSourceRow.name.in_(wanted))
    )
    known = {name: clusters for name, clusters in rows}
    added, unknown = [], [name for name in wanted if name not in known]
    for name in wanted:
        if name not in known or cluster in known[name]:
            continue
        try:
            if await add_locality(session, source=name, cluster=cluster):
                added.append(name)
        except NotFound:  # deleted since the read
            unknown.append(name)
    return Presence(added=added, unknown=unknown)
