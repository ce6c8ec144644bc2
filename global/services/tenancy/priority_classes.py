"""PriorityClasses (`scheduling.k8s.io/v1`) as stored resources: the built-in system classes
always present, the settings table seeding the rest on first start, at most one global
default; what a job's `priorityClassName` resolves against at submission."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Literal

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.models import PriorityClassRow
from volcano_global.errors import Conflict, Invalid, NotFound
from volcano_global.jobspec.priority_classes import (
    BUILT_IN,
    SYSTEM_PREFIX,
    PriorityClass,
)

log = logging.getLogger(__name__)
ClassMetadata = tuple[dict[str, str], dict[str, str]]  # labels, annotations


def _class(row: PriorityClassRow) -> PriorityClass:
    return PriorityClass(
        row.name, row.value, row.preemption_policy, row.global_default, row.description
    )


async def seed_priority_classes(session: AsyncSession, *, seeds: Mapping[str, int]) -> None:
    """Make the built-in classes exist; on first start (no class stored yet), also the
    settings' classes (`scheduling.priority_classes`), after which the settings are not read
    again. Called under the bootstrap lock."""
    stored = set((await session.execute(select(PriorityClassRow.name))).scalars())
    first_start = not stored
    for pc in BUILT_IN.values():
        if pc.name not in stored:
            session.add(_row(pc))
    if first_start:
        for name, value in seeds.items():
            if name.startswith(SYSTEM_PREFIX):
                log.warning("priority class %s not seeded: the system- prefix is reserved", name)
                continue
            session.add(_row(PriorityClass(name, value)))
    await session.flush()


def _row(pc: PriorityClass) -> PriorityClassRow:
    return PriorityClassRow(
        name=pc.name,
        value=pc.value,
        preemption_policy=pc.preemption_policy,
        global_default=pc.global_default,
        description=pc.description,
    )


async def list_priority_classes(session: AsyncSession) -> list[PriorityClass]:
    rows = await session.execute(select(PriorityClassRow).order_by(PriorityClassRow.name))
    return [_class(r) for r in rows.scalars()]


async def get_priority_class(session: AsyncSession, *, name: str) -> PriorityClass:
    return _class(await _get(session, name))


async def resolution_table(
    session: AsyncSession,
) -> tuple[dict[str, PriorityClass], str | None]:
    """What `priorityClassName` resolves against now: every class, and the global default."""
    classes = {pc.name: pc for pc in await list_priority_classes(session)}
    default = next((pc.name for pc in classes.values() if pc.global_default), None)
    return classes, default


async def create_priority_class(
    session: AsyncSession, *, pc: PriorityClass, metadata: ClassMetadata | None = None
) -> PriorityClass:
    """`metadata`: the labels and annotations the document carries (the Kubernetes view
    serves them; the REST shape has none)."""
    if await _find(session, pc.name) is not None:
        raise Conflict(f"priority class {pc.name!r} already exists")
    await _one_default(session, pc)
    row = _row(pc)
    if metadata is not None:
        row.labels, row.annotations = metadata
    session.add(row)
    await session.flush()
    return pc


async def replace_priority_class(
    session: AsyncSession, *, pc: PriorityClass, metadata: ClassMetadata | None = None
) -> PriorityClass:
    """Change a class's description or globalDefault (Kubernetes keeps value and
    preemptionPolicy immutable), and its labels and annotations when given; creates it when
    absent."""
    row = await _find(session, pc.name)
    if row is None:
        return await create_priority_class(session, pc=pc, metadata=metadata)
    if row.name in BUILT_IN:
        raise Invalid.one("metadata.name", f"{row.name} is a built-in class and cannot change")
    if row.value != pc.value:
        raise Invalid.one("value", f"is immutable (is {row.value})")
    if row.preemption_policy != pc.preemption_policy:
        raise Invalid.one("preemptionPolicy", f"is immutable (is {row.preemption_policy})")
    await _one_default(session, pc)
    row.global_default, row.description = pc.global_default, pc.description
    if metadata is not None:
        row.labels, row.annotations = metadata
    await session.flush()
    return _class(row)


async def apply_priority_class(
    session: AsyncSession, *, pc: PriorityClass
) -> Literal["created", "configured", "unchanged"]:
    """`apply` of a PriorityClass document: created, its description or globalDefault changed
    (configured), or left as it is (unchanged; a built-in class applied as it is, too)."""
    row = await _find(session, pc.name)
    if row is None:
        await create_priority_class(session, pc=pc)
        return "created"
    if _class(row) == pc:
        return "unchanged"
    await replace_priority_class(session, pc=pc)
    return "configured"


async def delete_priority_class(session: AsyncSession, *, name: str) -> None:
    row = await _get(session, name)
    if name in BUILT_IN:
        raise Conflict(f"{name} is a built-in priority class and cannot be deleted")
    await session.delete(row)
    await session.flush()


async def _one_default(session: AsyncSession, pc: PriorityClass) -> None:
    if not pc.global_default:
        return
    other = await session.execute(
        select(PriorityClassRow.name).where(
            PriorityClassRow.global_default.is_(True), PriorityClassRow.name != pc.name
        )
    )
    found = other.scalar_one_or_none()
    if found is not None:
        raise Invalid.one(
            "globalDefault",
            f"priority class {found} is already marked as default; only one default can exist",
        )


async def _find(session: AsyncSession, name: str) -> PriorityClassRow | None:
    found = await session.execute(select(PriorityClassRow).where(PriorityClassRow.name == name))
    return found.scalar_one_or_none()


async def _get(session: AsyncSession, name: str) -> PriorityClassRow:
    row = await _find(session, name)
    if row is None:
        raise NotFound(f"priority class {name!r} not found")
    return row
