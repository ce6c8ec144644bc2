"""The server's part of a Kubernetes object's metadata, and the identity a change may not
touch: one rule for every kind the Global stores as a document (jobs, queues, priority
classes, DataSources, claims). Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from volcano_global.errors import Invalid

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
