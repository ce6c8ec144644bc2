"""OpenAPI for the served kinds: v3 per group-version (what `kubectl explain` and kubectl's
check for server-side field validation read) and v2 in JSON. kubectl reads v2 only as
protobuf (client-side validation when the server cannot validate fields): that form is not
served, and kubectl does not need it here since v3 declares `fieldValidation`."""

from __future__ import annotations

import copy
import functools
import hashlib
import json
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse

from volcano_global.api.deps import Reader
from volcano_global.api.kube.kinds import KINDS
from volcano_global.api.kube.registry import PREFIX, Kind

router = APIRouter(prefix=PREFIX, tags=["kubernetes"], include_in_schema=False)

_OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_META_SCHEMA = {
    "type": "object",
    "description": "Standard object's metadata.",
    "properties": {
        "name": {"type": "string", "description": "Name, unique within a namespace."},
        "namespace": {"type": "string", "description": "Namespace of the object."},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
        "uid": {"type": "string"},
        "resourceVersion": {"type": "string"},
        "generation": {"type": "integer", "format": "int64"},
        "creationTimestamp": {"type": "string", "format": "date-time"},
        "deletionTimestamp": {"type": "string", "format": "date-time"},
    },
}


def _parameters(kind: Kind, *, named: bool) -> list[dict[str, Any]]:
    parameters = [
        {"name": "namespace", "in": "path", "required": True, "schema": {"type": "string"}}
    ]
    if named:
        parameters.append(
            {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}
        )
    return parameters


def _query(*names: str) -> list[dict[str, Any]]:
    return [
        {"name": n, "in": "query", "schema": {"type": "string"}, "uniqueItems": True} for n in names
    ]


def _operation(kind: Kind, verb: str, action: str, *params: str) -> dict[str, Any]:
    ref = {"$ref": f"#/components/schemas/{kind.schema_name}"}
    return {
        "operationId": f"{verb}{kind.kind}",
        "parameters": _query(*params),
        "responses": {"200": {"content": {"application/json": {"schema": ref}}}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {
            "group": kind.group,
            "version": kind.version,
            "kind": kind.kind,
        },
    }


def _v3_document(group: str, version: str) -> dict[str, Any]:
    kinds = [k for k in KINDS if k.group == group and k.version == version]
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {_OBJECT_META: _META_SCHEMA}
    for kind in kinds:
        base = f"/apis/{kind.group}/{kind.version}/namespaces/{{namespace}}/{kind.plural}"
        write = ("dryRun", "fieldManager", "fieldValidation")
        paths[base] = {
            "parameters": _parameters(kind, named=False),
            "get": _operation(
                kind,
                "list",
                "list",
                "labelSelector",
                "fieldSelector",
                "limit",
                "continue",
                "watch",
                "resourceVersion",
                "allowWatchBookmarks",
                "timeoutSeconds",
            ),
            "post": _operation(kind, "create", "post", *write),
        }
        paths[f"{base}/{{name}}"] = {
            "parameters": _parameters(kind, named=True),
            "get": _operation(kind, "read", "get"),
            "patch": _operation(kind, "patch", "patch", *write),
            "delete": _operation(kind, "delete", "delete"),
        }
        schema = copy.deepcopy(kind.schema)
        schema["properties"]["metadata"] = {
            "allOf": [{"$ref": f"#/components/schemas/{_OBJECT_META}"}],
            "description": "Standard object's metadata.",
        }
        schemas[kind.schema_name] = schema
    return {
        "openapi": "3.0.0",
        "info": {"title": "Volcano Global", "version": version},
        "paths": paths,
        "components": {"schemas": schemas},
    }


@functools.cache
def _v3_body(group: str, version: str) -> bytes:
    return json.dumps(_v3_document(group, version)).encode()


def _hash(body: bytes) -> str:
    return hashlib.sha512(body).hexdigest()[:128].upper()


@router.get("/openapi/v3")
async def openapi_v3_index(caller: Reader) -> dict[str, Any]:
    paths = {}
    for group, version in dict.fromkeys((k.group, k.version) for k in KINDS):
        digest = _hash(_v3_body(group, version))
        paths[f"apis/{group}/{version}"] = {
            "serverRelativeURL": f"{PREFIX}/openapi/v3/apis/{group}/{version}?hash={digest}"
        }
    return {"paths": paths}


@router.get("/openapi/v3/apis/{group}/{version}")
async def openapi_v3(group: str, version: str, caller: Reader) -> JSONResponse:
    if not any(k.group == group and k.version == version for k in KINDS):
        raise HTTPException(404, f"no OpenAPI document for {group}/{version}")
    return JSONResponse(content=json.loads(_v3_body(group, version)))


def _v2_schema(schema: Any) -> Any:
    """A v3 schema as a v2 definition: the same JSON Schema, references under #/definitions."""
    if isinstance(schema, dict):
        return {
            k: (
                v.replace("#/components/schemas/", "#/definitions/")
                if k == "$ref"
                else _v2_schema(v)
            )
            for k, v in schema.items()
        }
    if isinstance(schema, list):
        return [_v2_schema(v) for v in schema]
    return schema


@router.get("/openapi/v2")
async def openapi_v2(request: Request, caller: Reader) -> JSONResponse:
    accept = request.headers.get("accept", "application/json")
    if "json" not in accept and "*/*" not in accept:
        raise HTTPException(406, "OpenAPI v2 is served as application/json only")
    definitions: dict[str, Any] = {}
    for group, version in dict.fromkeys((k.group, k.version) for k in KINDS):
        schemas = _v3_document(group, version)["components"]["schemas"]
        definitions.update(_v2_schema(schemas))
    return JSONResponse(
        content={
            "swagger": "2.0",
            "info": {"title": "Volcano Global", "version": "v1"},
            "paths": {},
            "definitions": definitions,
        }
    )
