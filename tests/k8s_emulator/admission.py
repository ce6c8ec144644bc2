"""Admission plugins the emulator can run on creates. `owner_references_enforcement` is
kube-apiserver's OwnerReferencesPermissionEnforcement (plugin/pkg/admission/gc): whoever sets
ownerReferences on an object must be allowed to delete that object, and whoever sets
blockOwnerDeletion on a reference must be allowed to update the owner's `finalizers`
subresource; refused with 403 Forbidden, naming the object."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

from aiohttp import web

GVR = tuple[str, str, str]


@dataclass(frozen=True)
class Attributes:
    """The authorization question: may the caller `verb` this (kube's authorizer.Attributes)."""

    verb: str
    group: str
    resource: str
    subresource: str = ""
    namespace: str = ""
    name: str = ""


Authorize = Callable[[Attributes], bool]
Plugin = Callable[[GVR, str, dict[str, Any]], web.Response | None]


class Typed(Protocol):
    kind: str


def owner_references_enforcement(authorize: Authorize, types: Mapping[GVR, Typed]) -> Plugin:
    def admit(gvr: GVR, namespace: str, obj: dict[str, Any]) -> web.Response | None:
        meta = obj.get("metadata") or {}
        refs = meta.get("ownerReferences") or []
        if not refs:
            return None
        name = meta.get("name", "")
        if not authorize(Attributes("delete", gvr[0], gvr[2], "", namespace, name)):
            return _forbidden(gvr, name, "cannot set an ownerRef on a resource you can't delete")
        for ref in refs:
            if not ref.get("blockOwnerDeletion"):
                continue
            group = ref.get("apiVersion", "").rpartition("/")[0]
            plurals = [g[2] for g, t in types.items() if g[0] == group and t.kind == ref["kind"]]
            owner = Attributes("update", group, "", "finalizers", namespace, ref.get("name", ""))
            if not plurals or not all(authorize(replace(owner, resource=p)) for p in plurals):
                return _forbidden(
                    gvr,
                    name,
                    "cannot set blockOwnerDeletion if an ownerReference refers to a resource "
                    "you can't set finalizers on",
                )
        return None

    return admit


def _forbidden(gvr: GVR, name: str, why: str) -> web.Response:
    resource = f"{gvr[2]}.{gvr[0]}" if gvr[0] else gvr[2]
    return web.json_response(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "reason": "Forbidden",
            "message": f'{resource} "{name}" is forbidden: {why}: no RBAC policy matched, <nil>',
            "details": {"name": name, "group": gvr[0], "kind": gvr[2]},
            "code": 403,
        },
        status=403,
    )
