"""What every Kubernetes document the Global reads shares: its kind and apiVersion checked
first, its metadata.name, the server's part of its metadata, and the identity a change may
not touch; one rule for every kind the Global stores as a document (jobs, queues, priority
classes, DataSources, claims). Pure."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from volcano_global.errors import Invalid
from volcano_global.jobspec.fields import Checker, child

# A DNS-1123 subdomain (most Kubernetes object names); the length limit is the kind's.
SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")

# Server-set metadata: a caller's values are dropped (the server sets its own).
SERVER_METADATA = (
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "managedFields",
    "selfLink",
)


def drop_server_metadata(document: dict[str, Any], *, also: tuple[str, ...] = ()) -> None:
    """Drop the server's metadata (and the keys `also`) from the document, in place; a
    document without a metadata object is refused."""
    metadata = document.get("metadata")
    if not isinstance(metadata, dict):
        raise Invalid.one("metadata", "must be an object")
    for key in SERVER_METADATA + also:
        metadata.pop(key, None)


def require_unchanged(
    document: dict[str, Any], *, metadata: Mapping[str, Any], top: Mapping[str, Any]
) -> None:
    """Refuse a changed identity: each `metadata` key (`metadata.name`...) and each top-level
    key (`apiVersion`, `kind`) must keep its current value, named in the error."""
    for key, value in metadata.items():
        if document["metadata"].get(key) != value:
            raise Invalid.one(f"metadata.{key}", f"may not change (is {value!r})")
    for key, value in top.items():
        if document.get(key) != value:
            raise Invalid.one(key, f"may not change (is {value!r})")


def check_kind(check: Checker, doc: Any, *, kind: str, api_version: str) -> dict[str, Any]:
    """The document, if it is a mapping of `kind` at `api_version`; else `Invalid` at once
    (nothing more of it can be read)."""
    if not isinstance(doc, dict):
        check.fail("", f"must be a mapping (a {kind} document)")
        check.raise_if_any()
    if doc.get("kind") != kind:
        check.fail("kind", f"must be {kind}, got {doc.get('kind')!r}")
    elif doc.get("apiVersion") != api_version:
        check.fail("apiVersion", f"must be {api_version} for kind {kind}")
    check.raise_if_any()
    return doc


def named(check: Checker, doc: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The document's metadata and metadata.name, both required (a failure when missing)."""
    metadata = check.mapping(doc, "metadata", "", required=True) or {}
    return metadata, check.string(metadata, "name", "metadata", required=True)


def string_map(
    check: Checker, obj: dict[str, Any], key: str, path: str, *, problem: str = "must be a string"
) -> dict[str, str]:
    """The map `obj[key]` of strings (labels, annotations, attributes); each value that is
    not a string is a failure `problem` at its path, and left out."""
    found = check.mapping(obj, key, path) or {}
    for k, v in found.items():
        if not isinstance(v, str):
            check.fail(child(child(path, key), str(k)), problem)
    return {str(k): v for k, v in found.items() if isinstance(v, str)}
