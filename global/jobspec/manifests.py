"""A file of several Kubernetes documents (`---` separated, as `kubectl apply -f` takes them) split
and each one classified by apiVersion and kind, in order.

Pure: which kinds the server serves is registered by the layer that serves them
(`services/manifests.py`); here a document is only read, bounded, and named. A document that
cannot be read is an error of its own: the ones before it stand (a YAML syntax error stops the
reading there, as kubectl stops at it too).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import yaml

from volcano_global.errors import FieldError, Invalid
from volcano_global.jobspec.documents import (
    _StrictLoader,
    _TooDeep,
    check_depth,
    check_node_budget,
    is_empty_node,
    unstorable_text,
    yaml_problem,
)

MAX_DOCUMENTS = 500


@dataclass(frozen=True)
class Manifest:
    """One document of a file: its position (0-based, empty documents not counted), what it
    says it is, and either its content or why it could not be read."""

    index: int
    api_version: str | None = None
    kind: str | None = None
    name: str | None = None
    namespace: str | None = None
    document: dict[str, Any] | None = None
    errors: list[FieldError] = field(default_factory=list)

    @property
    def group(self) -> str:
        """The API group of `apiVersion` ("" for the core group, e.g. `v1`)."""
        version = self.api_version or ""
        return version.rsplit("/", 1)[0] if "/" in version else ""

    @property
    def label(self) -> str:
        """How a result names it: `document 2 (Queue llm)`."""
        what = " ".join(p for p in (self.kind, self.name) if p) or "unreadable"
        return f"document {self.index} ({what})"


def split_manifests(
    body: bytes | str, *, fmt: str, max_nodes: int, max_depth: int
) -> list[Manifest]:
    """Every document of a YAML stream (or the one of a JSON body, or a JSON `List`'s items),
    each bounded as a single submission is."""
    try:
        text = body.decode("utf-8") if isinstance(body, bytes) else body
    except UnicodeDecodeError as exc:
        return [Manifest(0, errors=[FieldError("", f"not valid UTF-8 ({exc.reason})")])]
    if fmt == "json":
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as exc:
            return [Manifest(0, errors=[FieldError("", f"invalid JSON: {exc}")])]
        items = data.get("items") if isinstance(data, dict) and data.get("kind") == "List" else None
        values = items if isinstance(items, list) else [data]
        return [_json_item(i, v, max_depth) for i, v in enumerate(values[:MAX_DOCUMENTS])]
    manifests: list[Manifest] = []
    composer = _StrictLoader(text)
    composer.max_depth = max_depth
    try:
        while composer.check_node():
            node = composer.get_node()
            if node is None or is_empty_node(node):
                continue
            index = len(manifests)
            if index >= MAX_DOCUMENTS:
                manifests.append(
                    Manifest(index, errors=[FieldError("", f"more than {MAX_DOCUMENTS} documents")])
                )
                break
            manifests.append(_construct(index, node, max_nodes=max_nodes, max_depth=max_depth))
    except _TooDeep as exc:
        manifests.append(Manifest(len(manifests), errors=[FieldError("", str(exc))]))
    except yaml.YAMLError as exc:
        manifests.append(Manifest(len(manifests), errors=[FieldError("", yaml_problem(exc))]))
    finally:
        composer.dispose()
    return manifests


def _json_item(index: int, value: Any, max_depth: int) -> Manifest:
    try:
        check_depth(value, max_depth)
    except Invalid as exc:
        return Manifest(index, errors=exc.errors)
    return _classify(index, value)


def _construct(index: int, node: yaml.Node, *, max_nodes: int, max_depth: int) -> Manifest:
    loader = _StrictLoader("")
    try:
        check_node_budget(node, max_nodes=max_nodes, max_depth=max_depth)
        value = loader.construct_document(node)
    except Invalid as exc:
        return Manifest(index, errors=exc.errors)
    except yaml.YAMLError as exc:
        return Manifest(index, errors=[FieldError("", yaml_problem(exc))])
    finally:
        loader.dispose()
    return _classify(index, value)


def _classify(index: int, value: Any) -> Manifest:
    if not isinstance(value, dict):
        return Manifest(index, errors=[FieldError("", "must be a mapping (a Kubernetes object)")])
    refused = unstorable_text(value)
    metadata = value.get("metadata") if isinstance(value.get("metadata"), dict) else {}
    strings = {
        key: v if isinstance(v, str) else None
        for key, v in (
            ("api_version", value.get("apiVersion")),
            ("kind", value.get("kind")),
            ("name", metadata.get("name")),
            ("namespace", metadata.get("namespace")),
        )
    }
    errors = []
    if refused is not None:
        errors.append(refused)
    for key, path in (("api_version", "apiVersion"), ("kind", "kind")):
        if not strings[key]:
            errors.append(FieldError(path, "required"))
    return Manifest(index, document=None if errors else value, errors=errors, **strings)
