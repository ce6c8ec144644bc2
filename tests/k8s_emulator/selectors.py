"""Label and field selectors as the API server parses them."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

Predicate = Callable[[dict[str, Any]], bool]
_SET = re.compile(r"^\s*([^\s!=]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")


def _split(selector: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts, depth, current = [], 0, ""
    for char in selector:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    if current.strip():
        parts.append(current)
    return [p.strip() for p in parts if p.strip()]


def label_selector(selector: str | None) -> Predicate:
    if not selector:
        return lambda _obj: True
    checks: list[Callable[[dict[str, str]], bool]] = []
    for term in _split(selector):
        match = _SET.match(term)
        if match:
            key, op, values = (
                match.group(1),
                match.group(2),
                {v.strip() for v in match.group(3).split(",")},
            )
            if op == "in":
                checks.append(lambda labels, k=key, vs=values: labels.get(k) in vs)
            else:
                checks.append(lambda labels, k=key, vs=values: labels.get(k) not in vs)
        elif "!=" in term:
            key, value = (s.strip() for s in term.split("!=", 1))
            checks.append(lambda labels, k=key, v=value: labels.get(k) != v)
        elif "=" in term:
            key, value = (s.strip() for s in term.replace("==", "=").split("=", 1))
            checks.append(lambda labels, k=key, v=value: labels.get(k) == v)
        elif term.startswith("!"):
            checks.append(lambda labels, k=term[1:].strip(): k not in labels)
        else:
            checks.append(lambda labels, k=term: k in labels)
    return lambda obj: all(
        check((obj.get("metadata") or {}).get("labels") or {}) for check in checks
    )


def field_selector(selector: str | None) -> Predicate:
    if not selector:
        return lambda _obj: True
    checks: list[Predicate] = []
    for term in _split(selector):
        negate = "!=" in term
        path, value = (s.strip() for s in term.replace("==", "=").split("!=" if negate else "=", 1))
        checks.append(
            lambda obj, p=path, v=value, n=negate: (_get(obj, p) != v) if n else (_get(obj, p) == v)
        )
    return lambda obj: all(check(obj) for check in checks)


def _get(obj: dict[str, Any], path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return "" if value is None else str(value)
