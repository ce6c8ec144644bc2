"""The API's discovery documents, from the types the emulator serves now: `/api`, `/api/v1`,
`/apis`, `/apis/{group}` and `/apis/{group}/{version}` (APIVersions, APIGroupList, APIGroup,
APIResourceList), so that a custom resource registered later appears in discovery as a CRD
installed later does. A group or version with no types is absent (404), as on a real server."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]


class Served(Protocol):
    kind: str
    namespaced: bool


def document(types: Mapping[tuple[str, str, str], Served], path: str) -> dict[str, Any] | None:
    """The discovery document at `path`, or None when `path` is not a discovery path (or
    names a group or version nothing is served under)."""
    parts = [p for p in path.split("/") if p]
    if parts == ["api"]:
        return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
    if parts == ["api", "v1"]:
        return _resources("v1", {g: t for g, t in types.items() if g[0] == ""})
    if not parts or parts[0] != "apis" or len(parts) > 3:
        return None
    groups: dict[str, list[str]] = {}
    for group, version, _ in types:
        if group and version not in groups.setdefault(group, []):
            groups[group].append(version)
    if len(parts) == 1:
        return {
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": [_group(name, versions) for name, versions in sorted(groups.items())],
        }
    if parts[1] not in groups:
        return None
    if len(parts) == 2:
        return {"kind": "APIGroup", "apiVersion": "v1", **_group(parts[1], groups[parts[1]])}
    served = {g: t for g, t in types.items() if g[:2] == (parts[1], parts[2])}
    return _resources(f"{parts[1]}/{parts[2]}", served) if served else None


def _group(name: str, versions: list[str]) -> dict[str, Any]:
    listed = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": listed, "preferredVersion": listed[0]}


def _resources(group_version: str, types: Mapping[tuple[str, str, str], Served]) -> dict[str, Any]:
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": [
            {
                "name": plural,
                "singularName": served.kind.lower(),
                "namespaced": served.namespaced,
                "kind": served.kind,
                "verbs": VERBS,
            }
            for (_, _, plural), served in sorted(types.items())
        ],
    }
