"""The served kinds' REST verbs as the Kubernetes API server answers them: list (label and
field selectors, limit/continue, Table), watch, get (and /status), create, merge patch,
delete. Each kind's store is its registration's adapter."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse

from volcano_global.api.deps import AppSettings, LoneSubmitter, Reader, Session, Submitter
from volcano_global.api.kube.adapters import refuse_unknown
from volcano_global.api.kube.kinds import KINDS
from volcano_global.api.kube.lists import list_response
from volcano_global.api.kube.registry import PREFIX, Kind, unknown_fields
from volcano_global.api.kube.tables import table, wants_table
from volcano_global.api.kube.watch import open_watch
from volcano_global.errors import Invalid, UnsupportedMediaType
from volcano_global.jobspec import load_document
from volcano_global.services.kube import store
from volcano_global.services.kube.selectors import SelectorLimits, field_selector, label_selector

router = APIRouter(
    prefix=f"{PREFIX}/apis/{{group}}/{{version}}", tags=["kubernetes"], include_in_schema=False
)

_BY_PATH = {(k.group, k.version, k.plural): k for k in KINDS}
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"


def _kind(group: str, version: str, plural: str, *, namespaced: bool | None = None) -> Kind:
    """The kind served at the path; `namespaced`: the path's scope (a cluster-scoped kind has
    no namespaced paths and the reverse)."""
    kind = _BY_PATH.get((group, version, plural))
    if kind is None or (namespaced is not None and kind.namespaced != namespaced):
        raise HTTPException(404, "the server could not find the requested resource")
    return kind


def _respond(
    request: Request, kind: Kind, obj: dict[str, Any], status: int = 200, **headers: str
) -> JSONResponse:
    if wants_table(request.headers.get("accept", "")):
        include = request.query_params.get("includeObject", "Metadata")
        metadata = {"resourceVersion": obj["metadata"]["resourceVersion"]}
        return JSONResponse(
            table(kind, [obj], metadata=metadata, include=include), status, headers or None
        )
    return JSONResponse(obj, status, headers or None)


def invalid(kind: Kind, name: str, exc: Invalid) -> JSONResponse:
    """A refused object as the API server words it (kubectl prints `The Job "x" is invalid:
    <field>: <why>`), every cause naming its field."""
    causes = [
        {"reason": "FieldValueInvalid", "message": f"Invalid value: {e.message}", "field": e.field}
        for e in exc.errors
    ]
    listed = "; ".join(
        f"{e.field}: Invalid value: {e.message}" if e.field else e.message for e in exc.errors
    )
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f'{kind.kind}.{kind.group} "{name}" is invalid: {listed}',
        "reason": "Invalid",
        "details": {"name": name, "group": kind.group, "kind": kind.kind, "causes": causes},
        "code": 422,
    }
    return JSONResponse(body, 422)


def _is_true(value: str | None) -> bool:
    return value in ("true", "1", "True")


async def _list_or_watch(
    request: Request, session: Any, caller: Any, kind: Kind, namespace: str | None
) -> Any:
    params = request.query_params
    kube = request.app.state.settings.kube
    limits = SelectorLimits(kube.selector_max_length, kube.selector_max_requirements)
    limit = params.get("limit")
    if limit is not None and (not limit.isdigit() or len(limit) > 9):
        raise Invalid.one("limit", f"{limit[:20]!r} is not a non-negative integer")
    query = store.ListQuery(
        namespace=namespace,
        labels=label_selector(params.get("labelSelector"), limits),
        fields=field_selector(params.get("fieldSelector"), limits),
        queues=caller.visible_queues(),
        limit=int(limit) if limit and int(limit) > 0 else None,
        continue_token=params.get("continue") or None,
    )
    if _is_true(params.get("watch")):
        if "watch" not in kind.verbs:
            raise HTTPException(405, f"{kind.plural}.{kind.group} cannot be watched")
        return open_watch(request, kind, query)
    return await list_response(request, session, kind, query)


@router.get("/{plural}")
async def list_all(
    group: str, version: str, plural: str, request: Request, session: Session, caller: Reader
) -> Any:
    """Every namespace's objects (`kubectl get vcjob -A`)."""
    return await _list_or_watch(request, session, caller, _kind(group, version, plural), None)


@router.get("/namespaces/{namespace}/{plural}")
async def list_namespace(
    group: str,
    version: str,
    namespace: str,
    plural: str,
    request: Request,
    session: Session,
    caller: Reader,
) -> Any:
    kind = _kind(group, version, plural, namespaced=True)
    return await _list_or_watch(request, session, caller, kind, namespace)


@router.get("/namespaces/{namespace}/{plural}/{name}")
@router.get("/namespaces/{namespace}/{plural}/{name}/status")
async def read(
    group: str,
    version: str,
    namespace: str,
    plural: str,
    name: str,
    request: Request,
    session: Session,
    caller: Reader,
) -> Any:
    kind = _kind(group, version, plural, namespaced=True)
    obj = await kind.adapter.get(session, kind=kind, namespace=namespace, name=name, caller=caller)
    return _respond(request, kind, obj)


@router.get("/{plural}/{name}")
@router.get("/{plural}/{name}/status")
async def read_cluster(
    group: str,
    version: str,
    plural: str,
    name: str,
    request: Request,
    session: Session,
    caller: Reader,
) -> Any:
    kind = _kind(group, version, plural, namespaced=False)
    obj = await kind.adapter.get(session, kind=kind, namespace="", name=name, caller=caller)
    return _respond(request, kind, obj)


def _field_warnings(kind: Kind, document: dict[str, Any], mode: str) -> dict[str, str]:
    """Unknown fields by the `fieldValidation` mode: Strict refuses them (kubectl's default),
    Warn (the API server's default) answers with Warning headers, Ignore drops nothing."""
    if mode == "Ignore":
        return {}
    unknown = unknown_fields({k: v for k, v in document.items() if k != "status"}, kind.schema)
    if mode == "Strict":
        refuse_unknown(unknown)
        return {}
    if not unknown:
        return {}
    return {"Warning": ", ".join(f'299 - "unknown field \\"{f}\\""' for f in unknown)}


@router.post("/namespaces/{namespace}/{plural}", status_code=201)
async def create(
    group: str, version: str, namespace: str, plural: str, request: Request, caller: LoneSubmitter
) -> Any:
    return await _create(_kind(group, version, plural, namespaced=True), namespace, request, caller)


@router.post("/{plural}", status_code=201)
async def create_cluster(
    group: str, version: str, plural: str, request: Request, caller: LoneSubmitter
) -> Any:
    return await _create(_kind(group, version, plural, namespaced=False), None, request, caller)


async def _create(kind: Kind, namespace: str | None, request: Request, caller: Any) -> Any:
    settings = request.app.state.settings
    media = request.headers.get("content-type", "application/json").split(";")[0].strip()
    document = load_document(
        await request.body(),
        fmt="yaml" if "yaml" in media else "json",
        max_nodes=settings.limits.max_document_nodes,
        max_depth=settings.limits.max_document_depth,
    )
    if document.get("apiVersion") != kind.group_version or document.get("kind") != kind.kind:
        raise Invalid.one(
            "kind",
            f"{document.get('apiVersion')}/{document.get('kind')} sent to the {kind.plural} "
            f"of {kind.group_version}",
        )
    metadata = document.setdefault("metadata", {})
    if not isinstance(metadata, dict):
        raise Invalid.one("metadata", "must be an object")
    if namespace is None:
        metadata.pop("namespace", None)  # a cluster-scoped object has none
    elif metadata.setdefault("namespace", namespace) != namespace:
        raise Invalid.one(
            "metadata.namespace",
            f"{metadata['namespace']!r} does not match the namespace of the request "
            f"({namespace!r})",
        )
    try:
        warnings = _field_warnings(
            kind, document, request.query_params.get("fieldValidation", "Warn")
        )
        if request.query_params.get("dryRun"):
            obj = await kind.adapter.check(request, kind=kind, document=document, caller=caller)
        else:
            obj = await kind.adapter.create(request, kind=kind, document=document, caller=caller)
    except Invalid as exc:
        return invalid(kind, str(metadata.get("name", "")), exc)
    return _respond(request, kind, obj, 201, **warnings)


@router.patch("/namespaces/{namespace}/{plural}/{name}")
async def patch(
    group: str,
    version: str,
    namespace: str,
    plural: str,
    name: str,
    request: Request,
    session: Session,
    settings: AppSettings,
    caller: Submitter,
) -> Any:
    kind = _kind(group, version, plural, namespaced=True)
    return await _patch(kind, namespace, name, request, session, settings, caller, None)


@router.patch("/{plural}/{name}")
@router.patch("/{plural}/{name}/{subresource}")
async def patch_cluster(
    group: str,
    version: str,
    plural: str,
    name: str,
    request: Request,
    session: Session,
    settings: AppSettings,
    caller: Submitter,
    subresource: str | None = None,
) -> Any:
    if subresource not in (None, "status"):
        raise HTTPException(404, "the server could not find the requested resource")
    kind = _kind(group, version, plural, namespaced=False)
    return await _patch(kind, "", name, request, session, settings, caller, subresource)


async def _patch(
    kind: Kind,
    namespace: str,
    name: str,
    request: Request,
    session: Any,
    settings: Any,
    caller: Any,
    subresource: str | None,
) -> Any:
    media = request.headers.get("content-type", "").split(";")[0].strip()
    # kubectl sends a built-in kind (PriorityClass) a strategic merge patch: for a kind with
    # no lists below its metadata it is a merge patch, once its directives are refused.
    strategic = media == STRATEGIC_MERGE_PATCH and kind.group == "scheduling.k8s.io"
    if media != MERGE_PATCH and not strategic:
        # As the API server answers for custom resources (no strategic merge), and for the
        # JSON patch and server-side apply this API does not implement.
        raise UnsupportedMediaType(
            "the body of the request was in an unknown format - accepted media types "
            f"include: {MERGE_PATCH}"
        )
    change = load_document(
        await request.body(),
        fmt="json",
        max_nodes=settings.limits.max_document_nodes,
        max_depth=settings.limits.max_document_depth,
    )
    try:
        if strategic:
            _refuse_directives(change)
        warnings = _field_warnings(
            kind, change, request.query_params.get("fieldValidation", "Warn")
        )
        extra = {"subresource": subresource} if subresource else {}
        obj = await kind.adapter.patch(
            session,
            kind=kind,
            namespace=namespace,
            name=name,
            change=change,
            caller=caller,
            settings=settings,
            dry_run=bool(request.query_params.get("dryRun")),
            **extra,
        )
    except Invalid as exc:
        return invalid(kind, name, exc)
    return _respond(request, kind, obj, **warnings)


def _refuse_directives(change: Any, path: str = "") -> None:
    if not isinstance(change, dict):
        return
    for key, value in change.items():
        child = f"{path}.{key}" if path else key
        if key.startswith("$"):
            raise Invalid.one(child, "strategic merge directives are not supported here")
        _refuse_directives(value, child)


@router.delete("/namespaces/{namespace}/{plural}/{name}")
async def delete(
    group: str,
    version: str,
    namespace: str,
    plural: str,
    name: str,
    request: Request,
    session: Session,
    settings: AppSettings,
    caller: Submitter,
) -> Any:
    kind = _kind(group, version, plural, namespaced=True)
    obj = await kind.adapter.delete(
        session, kind=kind, namespace=namespace, name=name, caller=caller, settings=settings
    )
    return _respond(request, kind, obj)


@router.delete("/{plural}/{name}")
async def delete_cluster(
    group: str,
    version: str,
    plural: str,
    name: str,
    request: Request,
    session: Session,
    settings: AppSettings,
    caller: Submitter,
) -> Any:
    kind = _kind(group, version, plural, namespaced=False)
    obj = await kind.adapter.delete(
        session, kind=kind, namespace="", name=name, caller=caller, settings=settings
    )
    return _respond(request, kind, obj)
