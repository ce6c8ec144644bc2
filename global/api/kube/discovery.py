"""Discovery as kubectl reads it: `/api`, `/apis`, each group and group-version, `/version`.
Served in the legacy (unaggregated) form: kubectl asks for aggregated discovery first and
falls back to these documents when the answer's Content-Type is plain `application/json`."""

from __future__ import annotations

import re
from typing import Any

from fastapi import APIRouter, HTTPException, Request

from volcano_global import __version__
from volcano_global.api.deps import Reader
from volcano_global.api.kube.events import EVENTS_RESOURCE
from volcano_global.api.kube.kinds import KINDS
from volcano_global.api.kube.registry import PREFIX, Kind

router = APIRouter(prefix=PREFIX, tags=["kubernetes"], include_in_schema=False)
# The Kubernetes release whose API (and kubectl) this imitation follows.
KUBERNETES_VERSION = (1, 32)
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def _groups() -> dict[str, list[Kind]]:
    groups: dict[str, list[Kind]] = {}
    for kind in KINDS:
        groups.setdefault(kind.group, []).append(kind)
    return groups


def _group(name: str, kinds: list[Kind]) -> dict[str, Any]:
    versions = []
    for kind in kinds:
        version = {"groupVersion": kind.group_version, "version": kind.version}
        if version not in versions:
            versions.append(version)
    return {"name": name, "versions": versions, "preferredVersion": versions[0]}


@router.get("/version")
async def version(caller: Reader) -> dict[str, str]:
    major, minor = KUBERNETES_VERSION
    return {
        "major": str(major),
        "minor": str(minor),
        "gitVersion": f"v{major}.{minor}.0+volcano-global.{__version__}",
        "platform": "volcano-global",
    }


@router.get("/api")
async def core_versions(caller: Reader) -> dict[str, Any]:
    return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}


_NAMESPACES = {
    "name": "namespaces",
    "singularName": "namespace",
    "namespaced": False,
    "kind": "Namespace",
    "verbs": ["get"],
    "shortNames": ["ns"],
}


@router.get("/api/v1")
async def core_resources(caller: Reader) -> dict[str, Any]:
    """Of the core group namespaces, to read (kubectl reads the namespace of an object it
    did not find, to say which of the two is missing), and jobs' events (kubectl describe)."""
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": "v1",
        "resources": [_NAMESPACES, EVENTS_RESOURCE],
    }


@router.get("/api/v1/namespaces/{name}")
async def namespace(name: str, caller: Reader) -> dict[str, Any]:
    """Every namespace exists in the Global: a job's namespace is the one it names, created
    with the job in the member cluster."""
    if not _DNS_LABEL.fullmatch(name):
        raise HTTPException(404, f'namespaces "{name}" not found')
    return {
        "kind": "Namespace",
        "apiVersion": "v1",
        "metadata": {"name": name},
        "spec": {},
        "status": {"phase": "Active"},
    }


@router.get("/apis")
async def groups(caller: Reader) -> dict[str, Any]:
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [_group(name, kinds) for name, kinds in _groups().items()],
    }


@router.get("/apis/{group}")
async def group(group: str, caller: Reader) -> dict[str, Any]:
    kinds = _groups().get(group)
    if kinds is None:
        raise HTTPException(404, f"the server could not find the requested resource ({group})")
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(group, kinds)}


def _resources(kind: Kind) -> list[dict[str, Any]]:
    main = {
        "name": kind.plural,
        "singularName": kind.singular,
        "namespaced": kind.namespaced,
        "kind": kind.kind,
        "verbs": list(kind.verbs),
        "shortNames": list(kind.short_names),
        "categories": list(kind.categories),
    }
    status = {
        "name": f"{kind.plural}/status",
        "singularName": "",
        "namespaced": kind.namespaced,
        "kind": kind.kind,
        "verbs": list(kind.status_verbs),
    }
    return [main, status]


@router.get("/apis/{group}/{version}")
async def group_version(group: str, version: str, request: Request, caller: Reader) -> Any:
    kinds = [k for k in KINDS if k.group == group and k.version == version]
    if not kinds:
        raise HTTPException(
            404, f"the server could not find the requested resource ({group}/{version})"
        )
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}",
        "resources": [r for kind in kinds for r in _resources(kind)],
    }
