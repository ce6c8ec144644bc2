"""The store behind the Kubernetes-compatible API's Job and HyperJob resources: the jobs
table, read by namespace and name (the newest job of a name that was not deleted through this
API), listed in key order a page at a time, changed by a merge patch of its metadata, and
deleted (cancelled, and gone from this view; `/api/v1/jobs` keeps it in the history)."""

from __future__ import annotations

import base64
import copy
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Select, func, select, tuple_
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.base import utcnow
from volcano_global.db.models import Cluster, ClusterShare, Job, Queue
from volcano_global.db.models.jobs import TERMINAL_JOB_STATES
from volcano_global.errors import Invalid, NotFound
from volcano_global.jobspec import ParseOptions, normalize_job
from volcano_global.jobspec.object_metadata import drop_server_metadata, require_unchanged
from volcano_global.services.jobs.cancel import cancel_job
from volcano_global.services.jobs.views import shown_placement
from volcano_global.services.kube import cluster_scoped
from volcano_global.services.kube.objects import resource_version
from volcano_global.services.kube.selectors import Selector

Row = dict[str, Any]


@dataclass(frozen=True)
class Resource:
    """Which stored jobs a resource serves, and how Kubernetes names it in messages."""

    kind: str  # the jobs table's `kind`: Job or HyperJob
    plural: str
    group: str

    def not_found(self, name: str) -> NotFound:
        return NotFound(f'{self.plural}.{self.group} "{name}" not found')


@dataclass(frozen=True)
class ListQuery:
    namespace: str | None = None
    labels: Selector = field(default_factory=Selector)
    fields: Selector = field(default_factory=Selector)
    queues: tuple[str, ...] | None = None  # a queue user's queues; None: any
    limit: int | None = None
    continue_token: str | None = None


# Of what the parser derived, the Kubernetes view shows only minAvailable: read in SQL, not by
# loading the columns (each is validated into its model when loaded, ~10 us a row).
_PARSED = frozenset({"gang", "split_policy", "communication"})
_MIN_AVAILABLE = Job.gang["minAvailable"].as_integer().label("min_available")


def _rows() -> Select[Any]:
    shown = [c for c in Job.__table__.c if c.name not in _PARSED]
    return select(*shown, _MIN_AVAILABLE, Queue.name.label("queue_name")).join(
        Queue, Queue.id == Job.queue_id
    )


def matches(row: Mapping[str, Any], query: ListQuery) -> bool:
    labels = (row["manifest"].get("metadata") or {}).get("labels") or {}
    fields = {"metadata.name": row["name"], "metadata.namespace": row["namespace"]}
    return (
        (query.namespace is None or row["namespace"] == query.namespace)
        and (query.queues is None or row["queue_name"] in query.queues)
        and query.labels.matches(labels)
        and query.fields.matches(fields)
    )


async def watermark(session: AsyncSession) -> int:
    """The newest change committed to any job, queue or priority class, in microseconds (the
    resourceVersion of a list); 0 with none."""
    newest = (await session.execute(select(func.max(Job.updated_at)))).scalar_one_or_none()
    others = await cluster_scoped.watermark(session)
    found = [t for t in (newest, others) if t is not None]
    return int(resource_version(max(found))) if found else 0


async def list_rows(
    session: AsyncSession, *, resource: Resource, query: ListQuery
) -> tuple[list[Row], str | None]:
    """One page of the resource's objects in (namespace, name) order, and the continue token
    of the next page (None on the last). Selectors are matched on the rows read, in batches,
    so a page holds `limit` matching objects whatever the selector skips."""
    start = _decode(query.continue_token) if query.continue_token else None
    page: list[Row] = []
    # One more than the page (to know whether there is a next), at most 500: a batch of rows
    # is held at once, and a job's row may be a megabyte.
    batch = min(query.limit or 500, 500) + 1
    last_key: tuple[str, str] | None = None
    while True:
        statement = _rows().where(Job.kind == resource.kind, Job.deleted_at.is_(None))
        if query.namespace is not None:
            statement = statement.where(Job.namespace == query.namespace)
        if query.queues is not None:
            statement = statement.where(Queue.name.in_(query.queues))
        if start is not None:
            statement = statement.where(tuple_(Job.namespace, Job.name) > tuple_(*start))
        statement = statement.order_by(
            Job.namespace, Job.name, Job.submitted_at.desc(), Job.id.desc()
        ).limit(batch)
        rows = [dict(r) for r in (await session.execute(statement)).mappings()]
        for row in rows:
            key = (row["namespace"], row["name"])
            if key == last_key:
                continue  # an older job of the name: the newest one stands for it
            last_key = key
            if not matches(row, query):
                continue
            if query.limit is not None and len(page) == query.limit:
                return page, _encode(page[-1])
            page.append(row)
        if len(rows) < batch or last_key is None:
            return page, None
        start = last_key  # the batch may end inside a name's older jobs: they are skipped


def _encode(row: Mapping[str, Any]) -> str:
    key = json.dumps([row["namespace"], row["name"]]).encode()
    return base64.urlsafe_b64encode(key).decode()


def _decode(token: str) -> tuple[str, str]:
    try:
        namespace, name = json.loads(base64.urlsafe_b64decode(token.encode()))
        return str(namespace), str(name)
    except (ValueError, TypeError) as exc:
        raise Invalid.one("continue", "not a continue token of this server") from exc


async def live_rows(
    session: AsyncSession, *, resource: Resource, namespace: str, name: str
) -> list[Row]:
    """The jobs of the name not deleted through this API, newest first."""
    statement = (
        _rows()
        .where(
            Job.kind == resource.kind,
            Job.deleted_at.is_(None),
            Job.namespace == namespace,
            Job.name == name,
        )
        .order_by(Job.submitted_at.desc(), Job.id.desc())
    )
    return [dict(r) for r in (await session.execute(statement)).mappings()]


async def get_row(session: AsyncSession, *, resource: Resource, namespace: str, name: str) -> Row:
    rows = await live_rows(session, resource=resource, namespace=namespace, name=name)
    if not rows:
        raise resource.not_found(name)
    return rows[0]


async def row_by_id(session: AsyncSession, uid: uuid.UUID) -> Row:
    row = (await session.execute(_rows().where(Job.id == uid))).mappings().one()
    return dict(row)


async def changed_since(session: AsyncSession, *, since: Any) -> list[Row]:
    """Every job changed after `since` (a UTC datetime), oldest change first."""
    statement = _rows().where(Job.updated_at > since).order_by(Job.updated_at, Job.id)
    return [dict(r) for r in (await session.execute(statement)).mappings()]


async def changed_page(
    session: AsyncSession, *, since: Any, after: tuple[Any, uuid.UUID] | None, limit: int
) -> list[Row]:
    """At most `limit` jobs changed after `since`, oldest change first, from after the
    (updated_at, id) key `after`: a watch's catch-up a page at a time."""
    statement = _rows().where(Job.updated_at > since)
    if after is not None:
        statement = statement.where(tuple_(Job.updated_at, Job.id) > tuple_(*after))
    statement = statement.order_by(Job.updated_at, Job.id).limit(limit)
    return [dict(r) for r in (await session.execute(statement)).mappings()]


async def clusters_of(session: AsyncSession, ids: list[uuid.UUID]) -> dict[uuid.UUID, list[str]]:
    """The clusters each job runs in, or ran in once finished, in rank order."""
    if not ids:
        return {}
    statement = (
        select(Job.id, Cluster.name)
        .select_from(Job)
        .join(ClusterShare, ClusterShare.placement_id == shown_placement(Job.id, Job.state))
        .join(Cluster, Cluster.id == ClusterShare.cluster_id)
        .where(Job.id.in_(ids))
        .order_by(Job.id, ClusterShare.rank_offset)
    )
    found: dict[uuid.UUID, list[str]] = {}
    for job_id, name in await session.execute(statement):
        found.setdefault(job_id, []).append(name)
    return found


async def delete(
    session: AsyncSession, *, resource: Resource, namespace: str, name: str, by: str
) -> Row:
    """Cancel the job of the name if it has not finished (its placement released) and take
    it, with any older job of the name, out of this view. Returns the newest one."""
    rows = await live_rows(session, resource=resource, namespace=namespace, name=name)
    if not rows:
        raise resource.not_found(name)
    now = utcnow()
    for row in rows:
        job = await cancel_job(session, uid=row["id"], by=by) if not _finished(row) else None
        job = job or await session.get(Job, row["id"])
        assert job is not None  # read in this transaction
        job.deleted_at = now
    await session.flush()
    return await row_by_id(session, rows[0]["id"])


def _finished(row: Mapping[str, Any]) -> bool:
    return row["state"] in TERMINAL_JOB_STATES


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: objects merge key by key, null removes, the rest replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


async def patch(
    session: AsyncSession,
    *,
    resource: Resource,
    namespace: str,
    name: str,
    current: dict[str, Any],
    change: dict[str, Any],
    options: ParseOptions,
    dry_run: bool = False,
) -> Row:
    """Apply a merge patch to the object `current` (as this API shows it). Labels and
    annotations may change; anything that changes what the job runs is refused, naming the
    field, as Volcano's webhook refuses most changes of a submitted job's spec. A dry run
    checks the same and writes nothing."""
    row = await get_row(session, resource=resource, namespace=namespace, name=name)
    document = merge_patch(current, change)
    if not isinstance(document, dict):
        raise Invalid.one("", "the patch must be a JSON object")
    document.pop("status", None)  # the status is the Global's, a patch of it is ignored
    # Server-set fields an update may not set: they are taken from the stored job.
    drop_server_metadata(document)
    require_unchanged(
        document,
        metadata={key: row[key] for key in ("name", "namespace")},
        top={key: row["manifest"].get(key) for key in ("apiVersion", "kind")},
    )
    stored = row["manifest"]
    if document.get("spec") != stored.get("spec"):
        raise Invalid.one(
            "spec",
            "a submitted job's spec does not change here: delete the job and create it again",
        )
    wanted = normalize_job(_without_estimates(document), options)
    parsed = normalize_job(_without_estimates(stored), options)
    # Volcano's preemptable annotation may change on a live job (its column follows below).
    if wanted.model_copy(update={"preemptable": parsed.preemptable}) != parsed:
        raise Invalid.one(
            "metadata.annotations",
            "changes what the job runs (a multi-cluster annotation): delete the job and "
            "create it again",
        )
    if dry_run:  # `kubectl diff`: the object as it would be, nothing written
        return row | {"manifest": document}
    job = await session.get(Job, row["id"])
    assert job is not None  # read in this transaction
    if document != stored:
        job.manifest = document
        job.preemptable = wanted.preemptable
        await session.flush()
    return await row_by_id(session, row["id"])


def _without_estimates(document: dict[str, Any]) -> dict[str, Any]:
    """The document without its `runningEstimate`s, which the spec check above keeps equal on
    both sides: a job stored before submission refused an estimate that is not a Go duration
    ("2h30") still takes a label or an annotation."""
    out = copy.deepcopy(document)
    spec = out.get("spec") if isinstance(out.get("spec"), dict) else {}
    spec.pop("runningEstimate", None)
    for entry in spec.get("replicatedJobs") or ():
        template = entry.get("templateSpec") if isinstance(entry, dict) else None
        if isinstance(template, dict):
            template.pop("runningEstimate", None)
    return out
