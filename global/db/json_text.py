"""The one text form of the JSON values SQLite stores: compact, UTF-8, keys sorted. Every
write path uses it (ORM and Core statements through the engine's serializer, bulk inserts
through `copy_rows`), so a value is stored as the same text whoever wrote it and in whatever
order its source listed the keys (an agent's protobuf map has none). Postgres' engine encodes
with it too (orjson is the cheaper encoder); its JSONB has a canonical form of its own."""

from __future__ import annotations

import json
from typing import Any

import orjson

_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_SORT_KEYS


def dumps(value: Any) -> str:
    try:
        return orjson.dumps(value, option=_OPTIONS).decode()
    except TypeError:  # what orjson refuses (an integer beyond 64 bits), in the same form
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
