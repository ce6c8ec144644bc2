"""Store adapters: what a registered kind is read, changed and watched through. The Volcano
Job and HyperJob adapter reads and writes the jobs table through the job services, so an
object created with kubectl is the same job `/api/v1/jobs` shows."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Protocol

from fastapi import Request
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.api.audit import audit_row
from volcano_global.api.jobs import tenancy_defaults
from volcano_global.errors import Conflict, FieldError, Invalid
from volcano_global.jobspec import ParseOptions
from volcano_global.services.jobs import submission as submissions
from volcano_global.services.kube import objects, store
from volcano_global.services.kube.feed import Change
from volcano_global.services.tenancy import priority_classes
from volcano_global.services.tenancy.submission_rules import SubmissionRules, submission_rules
from volcano_global.services.tenancy.tokens import Principal
from volcano_global.settings import Settings

if TYPE_CHECKING:
    from volcano_global.api.kube.registry import Kind

Classes = tuple[dict[str, Any], str | None]  # the stored classes by name, the global default


class Adapter(Protocol):
    async def list(
        self, session: AsyncSession, *, kind: Kind, query: store.ListQuery
    ) -> tuple[list[dict[str, Any]], str | None]: ...

    async def get(
        self, session: AsyncSession, *, kind: Kind, namespace: str, name: str, caller: Principal
    ) -> dict[str, Any]: ...

    async def create(
        self, request: Request, *, kind: Kind, document: dict[str, Any], caller: Principal
    ) -> dict[str, Any]: ...

    async def check(
        self, request: Request, *, kind: Kind, document: dict[str, Any], caller: Principal
    ) -> dict[str, Any]:
        """A create's dry run (`dryRun=All`): checked as `create` checks, nothing stored."""
        ...

    async def patch(
        self,
        session: AsyncSession,
        *,
        kind: Kind,
        namespace: str,
        name: str,
        change: dict[str, Any],
        caller: Principal,
        settings: Settings,
        dry_run: bool = False,
        subresource: str | None = None,
    ) -> dict[str, Any]: ...

    async def delete(
        self,
        session: AsyncSession,
        *,
        kind: Kind,
        namespace: str,
        name: str,
        caller: Principal,
        settings: Settings | None = None,
    ) -> dict[str, Any]: ...

    def event(
        self, kind: Kind, change: Change, query: store.ListQuery
    ) -> tuple[str, dict[str, Any]] | None:
        """The watch event (type, object) a change makes for a watch of `query`, if any."""
        ...


def parse_options(settings: Settings, classes: Classes | None = None) -> ParseOptions:
    """`classes`: the stored priority classes and the global default (what
    `priorityClassName` resolves against); without them the settings' seeds."""
    if classes is None:
        return ParseOptions(
            priority_classes=settings.scheduling.priority_classes,
            default_max_clusters=settings.scheduling.max_clusters,
            max_total_pods=settings.limits.max_total_pods,
        )
    return ParseOptions(
        priority_classes=classes[0],
        default_priority_class=classes[1],
        default_max_clusters=settings.scheduling.max_clusters,
        max_total_pods=settings.limits.max_total_pods,
    )


def _submission(
    settings: Settings,
    document: dict[str, Any],
    caller: Principal,
    rules: SubmissionRules,
) -> submissions.Submission:
    return submissions.Submission(
        body=json.dumps(document).encode(),
        fmt="json",
        options=parse_options(settings, (rules.classes, rules.default_class)),
        limits=submissions.SubmitLimits(
            max_nodes=settings.limits.max_document_nodes,
            max_depth=settings.limits.max_document_depth,
        ),
        default_queue=settings.scheduling.default_queue,
        tenancy=rules.tenancy,
        allowed_queues=caller.visible_queues(),
    )


class JobAdapter:
    """Volcano Jobs or HyperJobs: the jobs table's rows of one `kind`."""

    def __init__(self, kind: str, plural: str, group: str) -> None:
        self.resource = store.Resource(kind=kind, plural=plural, group=group)

    async def list(
        self, session: AsyncSession, *, kind: Kind, query: store.ListQuery
    ) -> tuple[list[dict[str, Any]], str | None]:
        rows, token = await store.list_rows(session, resource=self.resource, query=query)
        clusters = await store.clusters_of(session, [row["id"] for row in rows])
        return [objects.job_object(r, clusters.get(r["id"], [])) for r in rows], token

    async def _object(self, session: AsyncSession, row: dict[str, Any]) -> dict[str, Any]:
        clusters = await store.clusters_of(session, [row["id"]])
        return objects.job_object(row, clusters.get(row["id"], []))

    async def get(
        self, session: AsyncSession, *, kind: Kind, namespace: str, name: str, caller: Principal
    ) -> dict[str, Any]:
        row = await store.get_row(session, resource=self.resource, namespace=namespace, name=name)
        caller.require_queue(row["queue_name"])
        return await self._object(session, row)

    async def create(
        self, request: Request, *, kind: Kind, document: dict[str, Any], caller: Principal
    ) -> dict[str, Any]:
        """Submit the document as `POST /api/v1/jobs` does (the same parser and service). A
        name held by a job not deleted here, even a finished one, is taken: in Kubernetes the
        object exists until it is deleted."""
        app = request.app
        async with app.state.sessions() as session:
            # Read afresh when they changed: a class created a moment ago resolves.
            rules = await submission_rules(session, tenancy_defaults(app.state.settings))

        async def check_name(namespace: str, name: str) -> None:
            """After the document's queue and tenancy checks: a caller refused the namespace
            learns nothing of the names taken in it."""
            async with app.state.sessions() as session:
                taken = await store.live_rows(
                    session, resource=self.resource, namespace=namespace, name=name
                )
            if taken:
                raise Conflict(
                    f'{self.resource.plural}.{self.resource.group} "{name}" already exists'
                )

        submission = _submission(app.state.settings, document, caller, rules)
        row = await submissions.submit_job(
            submission,
            submitted_by=caller.name,
            writer=app.state.job_writer,
            events=[audit_row(request, caller)],
            check_name=check_name,
        )
        app.state.scheduler.wake.set()  # a new job: schedule without waiting for the period
        shown = {"deleted_at": None, "min_available": row["gang"].min_available}
        return objects.job_object(row | shown, [])  # as store's rows have them

    async def check(
        self, request: Request, *, kind: Kind, document: dict[str, Any], caller: Principal
    ) -> dict[str, Any]:
        settings = request.app.state.settings
        async with request.app.state.sessions() as session:
            rules = await submission_rules(session, tenancy_defaults(settings))
        submissions.read_submission(_submission(settings, document, caller, rules))
        return document

    async def patch(
        self,
        session: AsyncSession,
        *,
        kind: Kind,
        namespace: str,
        name: str,
        change: dict[str, Any],
        caller: Principal,
        settings: Settings,
        dry_run: bool = False,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        current = await self.get(session, kind=kind, namespace=namespace, name=name, caller=caller)
        row = await store.patch(
            session,
            resource=self.resource,
            namespace=namespace,
            name=name,
            current=current,
            change=change,
            options=parse_options(settings, await priority_classes.resolution_table(session)),
            dry_run=dry_run,
        )
        return await self._object(session, row)

    async def delete(
        self,
        session: AsyncSession,
        *,
        kind: Kind,
        namespace: str,
        name: str,
        caller: Principal,
        settings: Settings | None = None,
    ) -> dict[str, Any]:
        row = await store.get_row(session, resource=self.resource, namespace=namespace, name=name)
        caller.require_queue(row["queue_name"])
        deleted = await store.delete(
            session, resource=self.resource, namespace=namespace, name=name, by=caller.name
        )
        return await self._object(session, deleted)

    def event(
        self, kind: Kind, change: Change, query: store.ListQuery
    ) -> tuple[str, dict[str, Any]] | None:
        row = change.row
        if row["kind"] != self.resource.kind or not store.matches(row, query):
            return None
        if row["deleted_at"] is not None:
            kind_of_event = "DELETED"
        elif objects.is_created(row):
            kind_of_event = "ADDED"
        else:
            kind_of_event = "MODIFIED"
        return kind_of_event, objects.job_object(row, change.clusters)


def refuse_unknown(fields: list[str]) -> None:
    """Strict field validation (kubectl's default): every undeclared field refused by path."""
    if fields:
        raise Invalid([FieldError(f, "unknown field") for f in fields])
