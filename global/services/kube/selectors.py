"""Kubernetes label and field selectors (`app=x,tier in (a,b),!canary`, `metadata.name=x`),
parsed once per request and matched against an object's labels or fields."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from volcano_global.errors import Invalid

Requirement = Callable[[Mapping[str, str]], bool]

# One requirement: `key in (a, b)`, `key notin (a)`, `key=v`, `key==v`, `key!=v`, `key`, `!key`.
_SET = re.compile(r"^\s*(!?)\s*([A-Za-z0-9][-A-Za-z0-9_./]*)\s*(?:(in|notin)\s*\(([^)]*)\))?\s*$")
_EQUALITY = re.compile(r"^\s*([A-Za-z0-9][-A-Za-z0-9_./]*)\s*(==|!=|=)\s*([-A-Za-z0-9_.]*)\s*$")
FIELDS = ("metadata.name", "metadata.namespace")


@dataclass(frozen=True)
class Selector:
    requirements: tuple[Requirement, ...] = ()

    def matches(self, values: Mapping[str, str]) -> bool:
        return all(requirement(values) for requirement in self.requirements)


def _split(text: str) -> list[str]:
    """Split on the commas outside parentheses."""
    parts, depth, current = [], 0, ""
    for char in text:
        depth += char == "("
        depth -= char == ")"
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return [p for p in parts if p.strip()]


def _requirement(text: str, parameter: str) -> Requirement:
    equality = _EQUALITY.match(text)
    if equality:
        key, op, value = equality.groups()
        if op == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    found = _SET.match(text)
    if found is None:
        raise Invalid.one(parameter, f"cannot parse requirement {text.strip()!r}")
    negated, key, op, values = found.groups()
    if op is None:
        if negated:
            return lambda labels: key not in labels
        return lambda labels: key in labels
    if negated:
        raise Invalid.one(parameter, f"{text.strip()!r}: '!' goes before a bare key only")
    members = frozenset(v.strip() for v in values.split(",") if v.strip())
    if op == "in":
        return lambda labels: labels.get(key) in members
    return lambda labels: labels.get(key) not in members


def label_selector(text: str | None) -> Selector:
    if not text:
        return Selector()
    return Selector(tuple(_requirement(part, "labelSelector") for part in _split(text)))


def field_selector(text: str | None) -> Selector:
    """Field selectors on the fields every Kubernetes object supports (the name and the
    namespace), with =, == and !=, as the API server takes them for custom resources."""
    if not text:
        return Selector()
    requirements = []
    for part in _split(text):
        found = _EQUALITY.match(part)
        if found is None or found.group(1) not in FIELDS:
            raise Invalid.one(
                "fieldSelector",
                f"{part.strip()!r}: only {', '.join(FIELDS)} with =, == or != are supported",
            )
        requirements.append(_requirement(part, "fieldSelector"))
    return Selector(tuple(requirements))
