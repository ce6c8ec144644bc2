"""Server-side printing: a list, an object or a watch event as a `meta.k8s.io/v1` Table with
the kind's printer columns, which `kubectl get` prints as it receives it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from volcano_global.api.kube.registry import Kind, cells

TABLE_MEDIA = ("as=Table", "g=meta.k8s.io", "v=v1")


def wants_table(accept: str) -> bool:
    """The Accept header asks for a Table (kubectl: `application/json;as=Table;v=v1;
    g=meta.k8s.io, application/json`): the first acceptable form wins."""
    for media in accept.split(","):
        params = {p.strip().replace(" ", "") for p in media.split(";")[1:]}
        if all(p in params for p in TABLE_MEDIA):
            return True
        if media.split(";")[0].strip() in ("application/json", "*/*") and not params:
            return False
    return False


def human_age(created: str | None, now: datetime | None = None) -> str:
    """How long ago, in the API server's short form (`42s`, `5m3s`, `3h`, `12d`)."""
    if not created:
        return "<unknown>"
    then = datetime.strptime(created, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    return human_duration(((now or datetime.now(UTC)) - then).total_seconds())


def human_duration(total_seconds: float) -> str:
    """A span in the API server's short form (`42s`, `5m3s`, `3h`, `12d`), as kubectl
    prints ages and a Job's duration."""
    seconds = max(0, int(total_seconds))
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if seconds < 120:
        return f"{seconds}s"
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if days < 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    if days < 365 * 2:
        return f"{days}d"
    return f"{days // 365}y"


def run_duration(obj: dict[str, Any], now: datetime | None = None) -> str:
    """How long the job's run ran (`status.startTime` to `completionTime`, or to now while
    it runs), as `kubectl get job` prints DURATION; `<none>` before it started."""
    status = obj.get("status", {})
    if not status.get("startTime"):
        return "<none>"
    start = datetime.strptime(status["startTime"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    end = status.get("completionTime")
    until = (
        datetime.strptime(end, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        if end
        else now or datetime.now(UTC)
    )
    return human_duration((until - start).total_seconds())


def columns(kind: Kind) -> list[dict[str, Any]]:
    name = {
        "name": "Name",
        "type": "string",
        "format": "name",
        "description": "Name must be unique within a namespace.",
        "priority": 0,
    }
    return [name] + [
        {
            "name": c.name,
            "type": c.type,
            "format": c.format,
            "description": c.description or c.path,
            "priority": c.priority,
        }
        for c in kind.columns
    ]


def _row(kind: Kind, obj: dict[str, Any], include: str) -> dict[str, Any]:
    values = cells(kind, obj)
    for index, column in enumerate(kind.columns, start=1):
        if column.type == "date":
            values[index] = human_age(values[index])
    row: dict[str, Any] = {"cells": values}
    if include == "Object":
        row["object"] = obj
    elif include != "None":
        row["object"] = {
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": obj["metadata"],
        }
    return row


def table(
    kind: Kind,
    items: list[dict[str, Any]],
    *,
    metadata: dict[str, Any],
    include: str = "Metadata",
) -> dict[str, Any]:
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": columns(kind),
        "rows": [_row(kind, obj, include) for obj in items],
    }
