"""/api/v1/apply: a file of documents (`---` separated YAML, JSON, or a JSON `List`) applied in
order, as `kubectl apply -f` takes it, one result per document.

A document is handed to the applier registered for its API group and kind (`APPLIERS`):
Volcano Jobs and HyperJobs, Volcano Queues, Kubernetes PriorityClasses, and Volcano Global's
DataSources and DataSourceClaims (`api/data.py`: created, `configured` or `unchanged`). An
unknown kind is answered per document, naming its index and kind; the documents before and
after it are applied all the same (as kubectl goes on). The answer's status is 403 when the
caller's token was refused any document (with every document's result, as kubectl reports
each and then fails), else 200, a caller checking each `result` for the other errors. Each
refused document is in the audit trail as a refused call is (DENIED, naming the document and
why), each document that changed something as an accepted call.

What apply means per kind: a job alive with the same document is `unchanged`, else a new job is
`created` (a submitted job's spec does not change). A Queue or PriorityClass is created, or
replaced by the document (`configured`; a class's value and preemptionPolicy stay immutable),
or `unchanged` if the document is what is stored. A queue's state is its status: a document
without `status.state` leaves an existing queue Open or Closed as it is. Queues and classes
are changed by admins only, as through /api/v1/queues and /api/v1/priorityclasses.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Literal

from fastapi import APIRouter, Request, Response
from pydantic import Field

from volcano_global.api import audit, data, kind_apply
from volcano_global.api.deps import LoneSubmitter
from volcano_global.api.documents import body_format
from volcano_global.api.errors import STATUS_BY_ERROR
from volcano_global.api.jobs import DOCUMENT_BODY, submission_for
from volcano_global.errors import DomainError, FieldError
from volcano_global.jobspec.manifests import Manifest, split_manifests
from volcano_global.schemas.common import ApiModel, StatusCause, error_responses
from volcano_global.services.jobs import apply as job_apply
from volcano_global.services.tenancy.tokens import Principal

router = APIRouter(prefix="/api/v1/apply", tags=["apply"])


class AppliedDocument(ApiModel):
    index: int = Field(description="Position in the file, from 0 (empty documents not counted)")
    api_version: str | None
    kind: str | None
    name: str | None
    namespace: str | None
    result: Literal["created", "configured", "unchanged", "error"]
    uid: uuid.UUID | None = None
    code: int | None = Field(None, description="The HTTP status the error would have alone")
    message: str = ""
    causes: list[StatusCause] = Field(default_factory=list)


class ApplyResult(ApiModel):
    items: list[AppliedDocument]
    message: str = Field("", description="When any document was refused (403): which ones")


# A 403 is either the whole call's (a token that may not submit: a Status) or the refusal of
# some documents (the results of all of them).
_RESPONSES = {
    **error_responses(401, 413, 415),
    403: {
        "description": "The token was refused the call, or some documents (every result)",
        "content": {
            "application/json": {
                "schema": {
                    "anyOf": [
                        {"$ref": "#/components/schemas/Status"},
                        {"$ref": "#/components/schemas/ApplyResult"},
                    ]
                }
            }
        },
    },
}


Applier = Callable[[Request, Principal, Manifest], Awaitable[tuple[str, uuid.UUID | None]]]
APPLIERS: dict[tuple[str, str], Applier] = {}


def register(group: str, kind: str, applier: Applier) -> None:
    APPLIERS[(group, kind)] = applier


async def _apply_job(
    request: Request, caller: Principal, manifest: Manifest
) -> tuple[str, uuid.UUID | None]:
    assert manifest.document is not None
    applied = await job_apply.apply_job(
        manifest.document,
        await submission_for(request, request.app.state.settings, caller),
        sessions=request.app.state.sessions,
        submitted_by=caller.name,
        writer=request.app.state.job_writer,
        events=[audit.audit_row(request, caller)],
    )
    if applied.outcome == "created":
        request.app.state.scheduler.wake.set()
    return applied.outcome, applied.job_id


register("batch.volcano.sh", "Job", _apply_job)
register("training.volcano.sh", "HyperJob", _apply_job)
register("scheduling.volcano.sh", "Queue", kind_apply.apply_queue)
register("scheduling.k8s.io", "PriorityClass", kind_apply.apply_priority_class)
register("datadependency.volcano.sh", "DataSource", data.apply_data_source)
register("datadependency.volcano.sh", "DataSourceClaim", data.apply_claim)


@router.post(
    "",
    operation_id="applyDocuments",
    responses=_RESPONSES,
    openapi_extra=DOCUMENT_BODY,
)
async def apply_documents(
    request: Request, response: Response, caller: LoneSubmitter
) -> ApplyResult:
    """Apply every document of the body in order: a job already alive with the same document is
    `unchanged`, a new one `created`; each failure is that document's alone. 403 (with every
    result) when the token was refused any document."""
    settings = request.app.state.settings
    manifests = split_manifests(
        await request.body(),
        fmt=body_format(request),
        max_nodes=settings.limits.max_document_nodes,
        max_depth=settings.limits.max_document_depth,
    )
    items = [await _apply_one(request, caller, m) for m in manifests]
    refused = [i for i in items if i.code == 403]
    if not refused:
        return ApplyResult(items=items)
    # One record per refused document, as a refused call has, all in one transaction: a file
    # of many small refused documents costs one commit, not one each.
    await audit.record_denied(request, caller, *(i.message for i in refused))
    response.status_code = 403
    which = ", ".join(f"document {i.index} ({i.kind} {i.name})" for i in refused)
    return ApplyResult(
        items=items,
        message=f"{caller.name} was refused {len(refused)} of {len(items)} documents: {which}",
    )


async def _apply_one(request: Request, caller: Principal, manifest: Manifest) -> AppliedDocument:
    result = AppliedDocument(
        index=manifest.index,
        api_version=manifest.api_version,
        kind=manifest.kind,
        name=manifest.name,
        namespace=manifest.namespace,
        result="error",
    )
    if manifest.errors:
        return _failed(result, 422, f"{manifest.label} cannot be read", manifest.errors)
    key = (manifest.group, manifest.kind or "")
    applier = APPLIERS.get(key)
    if applier is None:
        served = ", ".join(f"{k} ({g})" for g, k in APPLIERS)
        message = (
            f"{manifest.label}: unknown kind {manifest.kind} ({manifest.api_version}); "
            f"served: {served}"
        )
        return _failed(result, 422, message, [FieldError("kind", message)])
    try:
        outcome, uid = await applier(request, caller, manifest)
    except DomainError as exc:
        causes = getattr(exc, "errors", None) or []
        code = next((c for t, c in STATUS_BY_ERROR.items() if isinstance(exc, t)), 400)
        return _failed(result, code, f"{manifest.label}: {exc}", causes)
    return result.model_copy(update={"result": outcome, "uid": uid})


def _failed(
    result: AppliedDocument, code: int, message: str, causes: list[FieldError]
) -> AppliedDocument:
    return result.model_copy(
        update={
            "code": code,
            "message": message,
            "causes": [StatusCause(field=c.field, message=c.message) for c in causes],
        }
    )
