"""A custom resource checked against its CRD's structural schema, as kube-apiserver does on
create and update: unknown fields pruned (the default `fieldValidation=Warn` names each in a
`Warning` header; `Strict` refuses them), values of the wrong type or outside the schema's
enum, bounds, length or pattern refused with a 422 naming the field.

What it leaves out: CEL rules (`x-kubernetes-validations`; Volcano's Job CRD has none),
`x-kubernetes-list-type` uniqueness, defaults, formats other than int32/int64 ranges.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

CRDS = Path(__file__).parent / "crds"
_ROOT_KEPT = ("apiVersion", "kind", "metadata")  # ObjectMeta is the server's, not the schema's
_INT_RANGE = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}


@dataclass
class Checked:
    """The object as stored (pruned), the fields pruned, and what was wrong with it."""

    obj: dict[str, Any]
    unknown: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


@functools.cache
def crd_schema(filename: str, version: str) -> dict[str, Any]:
    """The openAPIV3Schema of one version of a CRD file in crds/ (read once per run)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    crd = yaml.load((CRDS / filename).read_text(), Loader=loader)  # a safe loader, in C
    for served in crd["spec"]["versions"]:
        if served["name"] == version:
            return dict(served["schema"]["openAPIV3Schema"])
    raise KeyError(f"{filename} has no version {version}")


def check(obj: dict[str, Any], schema: dict[str, Any]) -> Checked:
    """Prune and validate a whole object (its metadata left to the server)."""
    result = Checked(obj={})
    properties = schema.get("properties") or {}
    for key, value in obj.items():
        if key in _ROOT_KEPT:
            result.obj[key] = value
        elif key in properties:
            result.obj[key] = _value(value, properties[key], key, result)
        else:
            result.unknown.append(key)
    return result


def _value(value: Any, schema: dict[str, Any], path: str, result: Checked) -> Any:
    if value is None:
        if not schema.get("nullable"):
            result.errors.append(
                f'{path}: Invalid value: "null": {path} in body must be of type '
                f'{schema.get("type", "object")}: "null"'
            )
        return value
    if schema.get("x-kubernetes-int-or-string"):
        if isinstance(value, bool) or not isinstance(value, int | str):
            result.errors.append(f"{path}: Invalid value: {_show(value)}: must be int or string")
        return value
    kind = schema.get("type")
    if not _has_type(value, kind):
        result.errors.append(
            f"{path}: Invalid value: {_show(value)}: {path} in body must be of type {kind}: "
            f'"{_json_type(value)}"'
        )
        return value
    if kind == "object":
        return _object(value, schema, path, result)
    if kind == "array":
        _bounds(len(value), schema, path, result, low="minItems", high="maxItems")
        items = schema.get("items") or {}
        return [_value(v, items, f"{path}[{i}]", result) for i, v in enumerate(value)]
    _scalar(value, schema, path, result)
    return value


def _object(value: dict[str, Any], schema: dict[str, Any], path: str, result: Checked) -> Any:
    for name in schema.get("required") or []:
        if name not in value:
            result.errors.append(f"{path}.{name}: Required value")
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return value
    properties = schema.get("properties")
    extra = schema.get("additionalProperties")
    kept: dict[str, Any] = {}
    for key, item in value.items():
        where = f"{path}.{key}"
        if properties is not None and key in properties:
            kept[key] = _value(item, properties[key], where, result)
        elif isinstance(extra, dict):
            kept[key] = _value(item, extra, where, result)
        elif extra is True:
            kept[key] = item
        else:
            result.unknown.append(where)  # pruned, as the API server prunes it
    return kept


def _scalar(value: Any, schema: dict[str, Any], path: str, result: Checked) -> None:
    if "enum" in schema and value not in schema["enum"]:
        allowed = ", ".join(f'"{v}"' for v in schema["enum"])
        result.errors.append(
            f"{path}: Unsupported value: {_show(value)}: supported values: {allowed}"
        )
    if isinstance(value, str):
        _bounds(len(value), schema, path, result, low="minLength", high="maxLength")
        pattern = schema.get("pattern")
        if pattern and not re.search(pattern, value):
            result.errors.append(
                f"{path}: Invalid value: {_show(value)}: {path} in body should match '{pattern}'"
            )
    elif isinstance(value, int | float):
        low, high = _INT_RANGE.get(schema.get("format", ""), (None, None))
        low = schema.get("minimum", low)
        high = schema.get("maximum", high)
        if low is not None and value < low:
            result.errors.append(
                f"{path}: Invalid value: {_show(value)}: {path} in body should be greater "
                f"than or equal to {low}"
            )
        if high is not None and value > high:
            result.errors.append(
                f"{path}: Invalid value: {_show(value)}: {path} in body should be less "
                f"than or equal to {high}"
            )


def _bounds(
    size: int, schema: dict[str, Any], path: str, result: Checked, *, low: str, high: str
) -> None:
    items = low == "minItems"  # arrays and strings word it differently, as the API server does
    if low in schema and size < schema[low]:
        result.errors.append(
            f"{path}: Invalid value: {size}: {path} in body should have at least "
            f"{schema[low]} items"
            if items
            else f"{path}: Invalid value: {size}: {path} in body should be at least "
            f"{schema[low]} chars long"
        )
    if high in schema and size > schema[high]:
        result.errors.append(
            f"{path}: Too many: {size}: must have at most {schema[high]} items"
            if items
            else f"{path}: Too long: may not be longer than {schema[high]}"
        )


def _has_type(value: Any, kind: str | None) -> bool:
    if kind is None:
        return True
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    expected = {"object": dict, "array": list, "string": str, "boolean": bool}[kind]
    return isinstance(value, expected)


def _json_type(value: Any) -> str:
    for name, types in (("boolean", bool), ("integer", int), ("number", float), ("string", str)):
        if isinstance(value, types):
            return name
    return "object" if isinstance(value, dict) else "array"


def _show(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else str(value)
