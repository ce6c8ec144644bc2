"""The emulator: an aiohttp server on a loopback port speaking enough of the Kubernetes API for
the agent: lists with increasing resourceVersions and `limit`/`continue`, watches from a
resourceVersion (watches.py: ADDED/MODIFIED/DELETED, objects entering or leaving a selector
become ADDED/DELETED, bookmarks, 410 "Expired" for a version the bounded history no longer
holds), label and field selectors, create/replace/merge-patch/delete, core resources
(PersistentVolumeClaims among them: no PV controller binds them, tests set their phase), batch/v1
Jobs (run by a stand-in job controller, batch_jobs.py) and registered custom resources (e.g.
Fluid's Datasets). Created and replaced objects go through admission first
(`admission.py`: names, Volcano Jobs' CRD schema and Volcano's webhook).

Deviation from a real API server (documented because tests must not depend on it): a paginated
list serves the live state at each page, not a snapshot at the first page's resourceVersion.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from aiohttp import web
from multidict import CIMultiDict

from tests.k8s_emulator import admission, discovery, gc
from tests.k8s_emulator.batch_jobs import JobController
from tests.k8s_emulator.faults import Faults
from tests.k8s_emulator.owner_references import Plugin
from tests.k8s_emulator.selectors import Predicate, field_selector, label_selector
from tests.k8s_emulator.watches import Event, WatchCache

GVR = tuple[str, str, str]  # (group, version, plural); core group is ""
NODES: GVR = ("", "v1", "nodes")
PODS: GVR = ("", "v1", "pods")
NAMESPACES: GVR = ("", "v1", "namespaces")
SERVICES: GVR = ("", "v1", "services")
EVENTS: GVR = ("", "v1", "events")
PVCS: GVR = ("", "v1", "persistentvolumeclaims")
BATCH_JOBS: GVR = ("batch", "v1", "jobs")
SERVICE_EXPORTS: GVR = ("multicluster.x-k8s.io", "v1alpha1", "serviceexports")
HYPERNODES: GVR = ("topology.volcano.sh", "v1alpha1", "hypernodes")
VOLCANO_JOBS: GVR = ("batch.volcano.sh", "v1alpha1", "jobs")
VOLCANO_QUEUES: GVR = ("scheduling.volcano.sh", "v1beta1", "queues")  # cluster-scoped
FLUID_DATASETS: GVR = ("data.fluid.io", "v1alpha1", "datasets")  # Fluid's CRD, when registered
# The resources with a `status` subresource (the custom ones: their published CRDs declare
# `subresources: {status: {}}`): over HTTP a create or an update of the object leaves
# `.status` alone, and only `<object>/status` changes it (as the Volcano controller, the PV
# controller or Fluid's write it). Tests set a status with `patch` directly.
STATUS_SUBRESOURCE = frozenset(
    {VOLCANO_JOBS, HYPERNODES, VOLCANO_QUEUES, BATCH_JOBS, PVCS, FLUID_DATASETS}
)


@dataclass(frozen=True)
class ResourceType:
    kind: str
    namespaced: bool


class KubeEmulator:
    def __init__(self, *, history: int = 10_000) -> None:
        """`history`: events kept per resource type for watches (the watch cache's capacity)."""
        self.types: dict[GVR, ResourceType] = {
            NODES: ResourceType("Node", False),
            PODS: ResourceType("Pod", True),
            NAMESPACES: ResourceType("Namespace", False),
            SERVICES: ResourceType("Service", True),
            EVENTS: ResourceType("Event", True),
            BATCH_JOBS: ResourceType("Job", True),
            PVCS: ResourceType("PersistentVolumeClaim", True),
        }
        self.objects: dict[GVR, dict[tuple[str, str], dict[str, Any]]] = {
            gvr: {} for gvr in self.types
        }
        self.rv = 1000
        self.compacted_rv = self.rv
        self.watch_cache = WatchCache(capacity=history, start_rv=self.rv)
        self.requests: list[str] = []  # "GET /api/v1/nodes?limit=..." for assertions
        self.faults = Faults()  # answers a test injects (faults.py)
        self.admission: list[Plugin] = []  # run on every create (admission.py)
        self.jobs = JobController()  # runs the batch/v1 Jobs created over HTTP
        self._runner: web.AppRunner | None = None
        self.port = 0
        for namespace in ("default", "kube-system"):  # every cluster has them
            self.create(NAMESPACES, {"metadata": {"name": namespace}})

    # -- lifecycle ------------------------------------------------------------------------
    async def start(self) -> str:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return f"http://127.0.0.1:{self.port}"

    async def stop(self) -> None:
        self.watch_cache.end_watches()
        if self._runner is not None:
            await self._runner.cleanup()

    def register(self, gvr: GVR, kind: str, *, namespaced: bool) -> None:
        """Install a custom resource definition."""
        self.types[gvr] = ResourceType(kind, namespaced)
        self.objects.setdefault(gvr, {})

    # -- state changes (also used directly by tests) --------------------------------------
    def create(self, gvr: GVR, obj: dict[str, Any]) -> dict[str, Any]:
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        namespace = meta.get("namespace", "default") if self.types[gvr].namespaced else ""
        key = (namespace, meta["name"])
        if key in self.objects[gvr]:
            raise KeyError(f"{meta['name']} already exists")
        if namespace:
            meta["namespace"] = namespace
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
        return self._store(gvr, key, obj, "ADDED", None)

    def replace(self, gvr: GVR, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        key = (meta.get("namespace", "") if self.types[gvr].namespaced else "", meta["name"])
        old = self.objects[gvr][key]
        obj = copy.deepcopy(obj)
        for kept in ("uid", "creationTimestamp", "namespace"):
            if kept in old["metadata"]:
                obj["metadata"][kept] = old["metadata"][kept]
        return self._store(gvr, key, obj, "MODIFIED", old)

    def patch(
        self, gvr: GVR, name: str, patch: dict[str, Any], namespace: str = ""
    ) -> dict[str, Any]:
        key = (namespace if self.types[gvr].namespaced else "", name)
        old = self.objects[gvr][key]
        return self._store(gvr, key, _merge(copy.deepcopy(old), patch), "MODIFIED", old)

    def delete(self, gvr: GVR, name: str, namespace: str = "") -> dict[str, Any]:
        key = (namespace if self.types[gvr].namespaced else "", name)
        old = self.objects[gvr].pop(key)
        self.rv += 1
        gone = copy.deepcopy(old)
        gone["metadata"]["resourceVersion"] = str(self.rv)
        self.watch_cache.add(Event(self.rv, gvr, "DELETED", gone, old))
        return gone

    def compact(self) -> None:
        """Forget the event history, as etcd compaction does: older watches get 410."""
        self.compacted_rv = self.rv
        self.watch_cache.compact(self.rv)

    def _store(
        self,
        gvr: GVR,
        key: tuple[str, str],
        obj: dict[str, Any],
        kind: str,
        old: dict[str, Any] | None,
    ) -> dict[str, Any]:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.objects[gvr][key] = obj
        self.watch_cache.add(Event(self.rv, gvr, kind, copy.deepcopy(obj), old))
        return obj

    # -- HTTP -----------------------------------------------------------------------------
    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(f"{request.method} {request.path_qs}")
        if (injected := self.faults.answer(request)) is not None:
            return injected
        if (
            request.method == "GET"
            and (served := discovery.document(self.types, request.path)) is not None
        ):
            return web.json_response(served)
        parsed = self._parse(request.path)
        if parsed is None:
            return _status(
                404,
                "NotFound",
                f"the server could not find the requested resource ({request.path})",
            )
        gvr, namespace, name, subresource = parsed
        if gvr not in self.types or (subresource and gvr not in STATUS_SUBRESOURCE):
            return _status(
                404,
                "NotFound",
                f"the server could not find the requested resource ({request.path})",
            )
        try:
            if request.method == "GET" and name is None:
                if request.query.get("watch") in ("1", "true", "True"):
                    return await self._watch(request, gvr, namespace)
                return self._list(request, gvr, namespace)
            if request.method == "GET":
                obj = self.objects[gvr].get((namespace or "", name))
                return (
                    web.json_response(obj)
                    if obj
                    else _status(
                        404, "NotFound", f'{gvr[2]} "{name}" not found', name=name, kind=gvr[2]
                    )
                )
            if subresource == "status" and request.method in ("PUT", "PATCH"):
                return web.json_response(
                    self._write_status(request, gvr, str(name), namespace, await request.json())
                )
            if request.method == "POST":
                body = await request.json()
                if gvr in STATUS_SUBRESOURCE:
                    body.pop("status", None)
                if namespace:
                    if ("", namespace) not in self.objects[NAMESPACES]:
                        missing = f'namespaces "{namespace}" not found'
                        return _status(404, "NotFound", missing, name=namespace, kind="namespaces")
                    body.setdefault("metadata", {})["namespace"] = namespace
                for admit in self.admission:
                    if (refusal := admit(gvr, namespace or "", body)) is not None:
                        return refusal
                admitted = self._admit(request, gvr, body)
                created = self.create(gvr, admitted.obj)
                if gvr == BATCH_JOBS:
                    self.jobs.started(self, gvr, created)
                return web.json_response(
                    self.objects[gvr][(namespace or "", created["metadata"]["name"])],
                    status=201,
                    headers=CIMultiDict(admission.warning_headers(admitted)),
                )
            if request.method == "PUT":
                body = self._keep_status(gvr, namespace, name, await request.json())
                if namespace:  # the URL's, as for a create
                    body.setdefault("metadata", {})["namespace"] = namespace
                admitted = self._admit(request, gvr, body)
                return web.json_response(
                    self.replace(gvr, admitted.obj),
                    headers=CIMultiDict(admission.warning_headers(admitted)),
                )
            if request.method == "PATCH":
                patch = await request.json()
                if gvr in STATUS_SUBRESOURCE:
                    patch.pop("status", None)
                return web.json_response(self.patch(gvr, str(name), patch, namespace or ""))
            if request.method == "DELETE":
                gone = self.delete(gvr, str(name), namespace or "")
                if await _propagation(request) != "Orphan":
                    asyncio.get_running_loop().call_soon(gc.collect, self)
                return web.json_response(gone)
        except admission.Refused as refused:
            return _status(refused.code, refused.reason, refused.message)
        except KeyError as exc:
            code = 409 if request.method == "POST" else 404
            reason = "AlreadyExists" if code == 409 else "NotFound"
            return _status(code, reason, str(exc), name=name or "")
        return _status(405, "MethodNotAllowed", request.method)

    def _keep_status(
        self, gvr: GVR, namespace: str | None, name: str | None, body: dict[str, Any]
    ) -> dict[str, Any]:
        """An update of an object with a status subresource keeps the stored status."""
        if gvr not in STATUS_SUBRESOURCE:
            return body
        old = self.objects[gvr].get((namespace or "", str(name)))
        body.pop("status", None)
        if old is not None and "status" in old:
            body["status"] = copy.deepcopy(old["status"])
        return body

    def _write_status(
        self,
        request: web.Request,
        gvr: GVR,
        name: str,
        namespace: str | None,
        body: dict[str, Any],
    ) -> dict[str, Any]:
        """`PUT` or merge-`PATCH` of `<object>/status`: the status changes, nothing else."""
        key = (namespace or "", name)
        old = self.objects[gvr][key]
        updated = copy.deepcopy(old)
        if request.method == "PUT":
            updated["status"] = body.get("status") or {}
        else:
            updated["status"] = _merge(updated.get("status") or {}, body.get("status") or {})
        return self._store(gvr, key, updated, "MODIFIED", old)

    def _admit(self, request: web.Request, gvr: GVR, body: dict[str, Any]) -> admission.Admitted:
        strict = request.query.get("fieldValidation") == "Strict"
        return admission.admit(gvr, self.types[gvr].kind, body, strict=strict)

    def _parse(self, path: str) -> tuple[GVR, str | None, str | None, str | None] | None:
        parts = [p for p in path.split("/") if p]
        if parts[:2] == ["api", "v1"]:
            group, version, rest = "", "v1", parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None
        namespace = None
        if len(rest) >= 2 and rest[0] == "namespaces" and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        subresource = rest[2] if len(rest) == 3 else None
        if not rest or len(rest) > 3 or subresource not in (None, "status"):
            return None
        return (
            (group, version, rest[0]),
            namespace,
            rest[1] if len(rest) >= 2 else None,
            subresource,
        )

    def _selected(self, request: web.Request, gvr: GVR, namespace: str | None) -> Predicate:
        labels = label_selector(request.query.get("labelSelector"))
        fields = field_selector(request.query.get("fieldSelector"))
        return lambda obj: (
            (namespace is None or obj["metadata"].get("namespace") == namespace)
            and labels(obj)
            and fields(obj)
        )

    def _list(self, request: web.Request, gvr: GVR, namespace: str | None) -> web.Response:
        matches = self._selected(request, gvr, namespace)
        items = sorted((key, obj) for key, obj in self.objects[gvr].items() if matches(obj))
        list_rv = self.rv
        token = request.query.get("continue")
        if token:
            list_rv, after = json.loads(base64.urlsafe_b64decode(token))
            if list_rv < self.compacted_rv:
                return _status(410, "Expired", "The provided continue parameter is too old")
            items = [(k, o) for k, o in items if list(k) > after]
        limit = int(request.query.get("limit") or 0)
        page = items[:limit] if limit else items
        metadata: dict[str, Any] = {"resourceVersion": str(list_rv)}
        if limit and len(items) > limit:
            metadata["continue"] = base64.urlsafe_b64encode(
                json.dumps([list_rv, list(page[-1][0])]).encode()
            ).decode()
            metadata["remainingItemCount"] = len(items) - limit
        kind = self.types[gvr].kind
        return web.json_response(
            {
                "kind": f"{kind}List",
                "apiVersion": f"{gvr[0]}/{gvr[1]}" if gvr[0] else gvr[1],
                "metadata": metadata,
                "items": [obj for _, obj in page],
            }
        )

    async def _watch(
        self, request: web.Request, gvr: GVR, namespace: str | None
    ) -> web.StreamResponse:
        return await self.watch_cache.serve(
            request,
            gvr,
            self._selected(request, gvr, namespace),
            objects=self.objects[gvr],
            kind=self.types[gvr].kind,
            api_version=f"{gvr[0]}/{gvr[1]}" if gvr[0] else gvr[1],
        )


async def _propagation(request: web.Request) -> str:
    """A delete's propagationPolicy, from the query or the DeleteOptions body."""
    if policy := request.query.get("propagationPolicy"):
        return policy
    try:
        options = json.loads(await request.read() or b"{}")
    except ValueError:
        return ""
    return str(options.get("propagationPolicy", "")) if isinstance(options, dict) else ""


def _status(
    code: int, reason: str, message: str, *, name: str = "", kind: str = ""
) -> web.Response:
    """A Status; one about a named object (or namespace) says its name and its resource
    (`kind`: "namespaces") in `details`, as kube-apiserver's do, while an unknown path's 404
    names nothing."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "reason": reason,
        "message": message,
        "code": code,
    }
    if name:
        body["details"] = {"name": name, **({"kind": kind} if kind else {})}
    return web.json_response(body, status=code)


def _merge(target: Any, patch: Any) -> Any:
    """JSON merge patch (RFC 7386)."""
    if not isinstance(patch, dict):
        return patch
    if not isinstance(target, dict):
        target = {}
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = _merge(target.get(key), value)
    return target
