"""The rows a transaction of deltas writes: stored nodes' UPDATEs (`nodes` and their
`node_usages`), new nodes and their usage rows, each kind one statement for every cluster."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.copy_rows import update_tuples
from volcano_global.db.models import Node, NodeUse
from volcano_global.services.inventory.node_usages import USAGE_TYPE, USAGE_UPDATED
from volcano_global.services.inventory.node_values import STORED, NodeValues
from volcano_global.services.inventory.snapshots import insert_many

_STORED_OF = attrgetter(*STORED)  # a NodeValues' values for the columns STORED, in order
# The columns an UPDATE of a stored node sets (found by its cluster and name), and on Postgres
# the composite type of those columns in this order (migrations/versions/0032, 0039).
UPDATED = (*STORED, "domain_id", "seq", "cluster_id")
UPDATED_TYPE = "node_update"


@dataclass
class NodeRows:
    """What a transaction of deltas writes to `nodes` and `node_usages`."""

    updates: list[tuple[Any, ...]] = field(default_factory=list)  # values for UPDATED
    usages: list[tuple[Any, ...]] = field(default_factory=list)  # for USAGE_UPDATED
    inserts: list[dict[str, Any]] = field(default_factory=list)  # new nodes
    new_usages: list[dict[str, Any]] = field(default_factory=list)  # their node_usages rows

    def upsert(
        self,
        node: NodeValues,
        cluster_id: uuid.UUID,
        seq: int,
        domain_id: uuid.UUID | None,
        *,
        stored: bool,
        now: Any,
    ) -> bool:
        """The node's rows (an update of both if `stored`, else an insert of both); whether
        it is new."""
        used = (node.name, node.gpu_used, node.cpu_used_millis, node.memory_used_bytes)
        if stored:
            self.updates.append((*_STORED_OF(node), domain_id, seq, cluster_id))
            self.usages.append((*used, seq, cluster_id))
            return False
        values = dict(zip(STORED, _STORED_OF(node), strict=True))
        extra = {"id": uuid.uuid4(), "cluster_id": cluster_id, "updated_at": now}
        self.inserts.append(values | extra | {"domain_id": domain_id, "seq": seq})
        usage = (*used, seq, cluster_id)
        self.new_usages.append(dict(zip(USAGE_UPDATED, usage, strict=True)))
        return True

    async def write(self, session: AsyncSession, now: Any) -> None:
        """The UPDATEs of stored nodes and usages, then the new nodes and their usages."""
        for table, columns, rows, row_type, constants in (
            (Node.__table__, UPDATED, self.updates, UPDATED_TYPE, {"updated_at": now}),
            (NodeUse.__table__, USAGE_UPDATED, self.usages, USAGE_TYPE, {}),
        ):
            await update_tuples(
                session,
                table,
                columns,
                rows,
                keys=("cluster_id", "name"),
                constants=constants,
                row_type=row_type,
            )
        await insert_many(session, Node, self.inserts)
        await insert_many(session, NodeUse, self.new_usages)
