"""Kubernetes-style documents in request and response bodies (YAML or JSON), for the resources
whose REST shape is the document itself (queues, priority classes)."""

from __future__ import annotations

import json
from typing import Any

import yaml
from fastapi import Request, Response

from volcano_global.errors import UnsupportedMediaType
from volcano_global.jobspec import load_document

YAML_TYPES = {"application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml"}


def document_body(description: str, **schema: Any) -> dict[str, Any]:
    """The OpenAPI request body of a document sent as YAML or JSON (`schema`: more of its
    JSON schema than its description)."""
    schema = {"type": "object", "description": description, **schema}
    return {
        "requestBody": {
            "required": True,
            "content": {
                "application/yaml": {"schema": schema},
                "application/json": {"schema": schema},
            },
        }
    }


def body_format(request: Request) -> str:
    """ "yaml" or "json", from the body's Content-Type (415 for anything else)."""
    media = request.headers.get("content-type", "application/json").split(";")[0].strip().lower()
    if media in YAML_TYPES:
        return "yaml"
    if media in ("application/json", "") or media.endswith("+json"):
        return "json"
    raise UnsupportedMediaType(f"Content-Type {media!r}: send application/yaml or application/json")


async def read_document(request: Request) -> dict[str, Any]:
    """The body as one document, within the server's document limits."""
    fmt = body_format(request)
    limits = request.app.state.settings.limits
    return load_document(
        await request.body(),
        fmt=fmt,
        max_nodes=limits.max_document_nodes,
        max_depth=limits.max_document_depth,
    )


def render_document(request: Request, doc: dict[str, Any]) -> Response:
    """JSON, or YAML when the request accepts YAML first."""
    accept = request.headers.get("accept", "").split(",")[0].split(";")[0].strip().lower()
    if accept in YAML_TYPES:
        text = yaml.safe_dump(doc, sort_keys=False)
        return Response(text, media_type="application/yaml")
    return Response(json.dumps(doc), media_type="application/json")
