"""Where an agent's inventory comes from: a source keeps an `Inventory` up to date and sets
`changed` whenever it moves. A source that knows which names it touched lets the agent build a
delta from those alone instead of comparing every node of the cluster. A source that runs
shares (`apply_share`, `cancel_share`) reports on them through a `Report`, and lists every
share its cluster holds (`held_shares() -> list[HeldShare]`, read from the cluster, with the
assignments it is still applying) for the Global to reconcile with its placements. A source
that can tell which data its cluster holds says so (`data_present() -> set[str]`: DataSource
names, core_agent/presence.py) and sets `changed` when that grows. A source that runs copies
that belong to no share (`apply_copy`, `cancel_copy`) reports on them through a `CopyReport`."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from core_agent.inventory import Changes, Inventory
from volcano_global.rpc.copies import CopyStatus
from volcano_global.rpc.shares import ShareStatus

Report = Callable[[ShareStatus], None]  # the agent's client numbers and sends the report
# A copy that belongs to no share (`apply_copy`, `cancel_copy`): where it stands, sent as is.
CopyReport = Callable[[CopyStatus], None]


class InventorySource(Protocol):
    name: str
    changed: asyncio.Event

    async def start(self) -> None:
        """Begin watching; return once the first full inventory is available."""

    async def stop(self) -> None: ...

    def current(self) -> Inventory:
        """A copy of the inventory as of now."""

    def take_changes(self) -> Changes | None:
        """The names touched since the last call, forgotten once returned; None when the
        source cannot tell (the agent then compares every name)."""

    def view_of(self, changes: Changes) -> Inventory:
        """A copy of just these nodes and domains as of now (those that still exist)."""
