"""What the Kubernetes-compatible API serves: one `Kind` registration per resource (group,
version, kind, plural, short names, scope, printer columns, OpenAPI schema, store adapter).
Discovery, OpenAPI, tables and the resource handlers are all derived from this list; a new kind
is one more registration with an adapter implementing `Adapter`."""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from volcano_global.api.kube.adapters import Adapter

PREFIX = "/k8s"
CRDS = Path(__file__).parent / "crds"
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: 10x faster on 250 KB


@dataclass(frozen=True)
class Column:
    """A printer column as a CRD declares it (`additionalPrinterColumns`): `path` is a simple
    JSONPath (`.status.state.phase`), or `value` computes the cell from the object."""

    name: str
    type: str
    path: str = ""
    priority: int = 0
    format: str = ""
    description: str = ""
    value: Callable[[dict[str, Any]], Any] | None = None


@dataclass(frozen=True)
class Kind:
    group: str
    version: str
    kind: str
    plural: str
    singular: str
    short_names: tuple[str, ...]
    namespaced: bool
    columns: tuple[Column, ...]
    crd_file: str  # in crds/: the CRD whose openAPIV3Schema describes the kind
    adapter: Adapter
    extra_status: dict[str, Any] = field(default_factory=dict)  # fields the Global adds
    verbs: tuple[str, ...] = ("create", "delete", "get", "list", "patch", "watch")
    status_verbs: tuple[str, ...] = ("get",)
    # `kubectl get all` lists the jobs; Kubernetes leaves cluster-scoped kinds out of it.
    categories: tuple[str, ...] = ("all", "volcano")

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def schema_name(self) -> str:
        """The definition's name as the API server writes it for a CRD (reversed group)."""
        return ".".join([*reversed(self.group.split(".")), self.version, self.kind])

    @functools.cached_property
    def schema(self) -> dict[str, Any]:
        """The kind's OpenAPI v3 schema: the CRD's, with the status fields the Global adds."""
        crd = yaml.load((CRDS / self.crd_file).read_text(), Loader=_LOADER)
        version = next(v for v in crd["spec"]["versions"] if v["name"] == self.version)
        schema = copy.deepcopy(version["schema"]["openAPIV3Schema"])
        status = schema["properties"].setdefault("status", {"type": "object"})
        status.setdefault("properties", {}).update(self.extra_status)
        schema["x-kubernetes-group-version-kind"] = [
            {"group": self.group, "version": self.version, "kind": self.kind}
        ]
        return schema


def cells(kind: Kind, obj: dict[str, Any]) -> list[Any]:
    """The row of `obj` in a table: its name, then each column's value."""
    return [obj["metadata"]["name"], *(_cell(c, obj) for c in kind.columns)]


def _cell(column: Column, obj: dict[str, Any]) -> Any:
    if column.value is not None:
        return column.value(obj)
    value: Any = obj
    for part in column.path.strip(".").split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def unknown_fields(document: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """The fields of `document` its schema does not declare (what the API server's strict
    field validation refuses), by path."""
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    found: list[str] = []
    if isinstance(document, dict) and schema.get("type", "object") == "object":
        properties = schema.get("properties")
        extra = schema.get("additionalProperties")
        for key, value in document.items():
            child = f"{path}.{key}" if path else key
            if properties is not None and key in properties:
                found += unknown_fields(value, properties[key], child)
            elif isinstance(extra, dict):
                found += unknown_fields(value, extra, child)
            elif properties is not None and extra is not True and path != "metadata":
                found.append(child)
    elif isinstance(document, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(document):
            found += unknown_fields(item, schema["items"], f"{path}[{index}]")
    return found
