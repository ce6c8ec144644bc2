"""Where an agent's inventory comes from: a source keeps an `Inventory` up to date and sets
`changed` whenever it moves."""

from __future__ import annotations

import asyncio
from typing import Protocol

from core_agent.inventory import Inventory


class InventorySource(Protocol):
    name: str
    changed: asyncio.Event

    async def start(self) -> None:
        """Begin watching; return once the first full inventory is available."""

    async def stop(self) -> None: ...

    def current(self) -> Inventory:
        """A copy of the inventory as of now."""
