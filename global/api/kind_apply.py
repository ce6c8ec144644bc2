"""Apply of a Queue or a PriorityClass document in a multi-document file (`/api/v1/apply`):
created when absent, `unchanged` when the document is what is stored, else replaced
(`configured`), with its audit record. A queue's state is its status, kept when the document
names none."""

from __future__ import annotations

import uuid

from fastapi import Request

from volcano_global.api import audit
from volcano_global.jobspec.manifests import Manifest
from volcano_global.jobspec.priority_classes import read_priority_class
from volcano_global.jobspec.queue_document import read_queue
from volcano_global.services.kube import cluster_scoped
from volcano_global.services.tenancy import priority_classes as classes
from volcano_global.services.tenancy import queues
from volcano_global.services.tenancy.tokens import Principal


async def apply_queue(
    request: Request, caller: Principal, manifest: Manifest
) -> tuple[str, uuid.UUID | None]:
    caller.require_admin()
    document = dict(manifest.document or {})
    async with request.app.state.sessions() as session:
        current = await queues.find_queue(session, name=str(manifest.name or ""))
        if current is not None and not (document.get("status") or {}).get("state"):
            document["status"] = {"state": current.state}
        definition = read_queue(document)
        if current is not None and queues.document_of(current) == queues.document_of(
            _as_queue(definition)
        ):
            return "unchanged", current.id
        queue = await queues.apply_queue(session, definition=definition)
        await audit.record_accepted(session, request, caller)
        await session.commit()
        return ("configured" if current is not None else "created"), queue.id


def _as_queue(definition: queues.QueueDefinition) -> queues.Queue:
    """The definition as a queue row would hold it (not added to a session)."""
    queue = queues.Queue(name=definition.name)
    queues.store_definition(queue, definition)
    return queue


async def apply_priority_class(
    request: Request, caller: Principal, manifest: Manifest
) -> tuple[str, uuid.UUID | None]:
    caller.require_admin()
    document = manifest.document or {}
    pc = read_priority_class(document)
    metadata = document.get("metadata") or {}
    labels = cluster_scoped.string_map(metadata, "labels")
    annotations = cluster_scoped.string_map(metadata, "annotations")
    async with request.app.state.sessions() as session:
        row = await cluster_scoped.priority_class_row(session, pc.name)
        if row is not None and (
            (row.value, row.preemption_policy, row.global_default, row.description)
            == (pc.value, pc.preemption_policy, pc.global_default, pc.description)
            and (row.labels or {}, row.annotations or {}) == (labels, annotations)
        ):
            return "unchanged", row.id
        await classes.replace_priority_class(session, pc=pc, metadata=(labels, annotations))
        await audit.record_accepted(session, request, caller)
        await session.commit()
        stored = await cluster_scoped.priority_class_row(session, pc.name)
        assert stored is not None  # just written
        return ("configured" if row is not None else "created"), stored.id
