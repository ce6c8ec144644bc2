"""API tokens for people and tools (agent and job tokens come with their cluster or job)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Literal

from pydantic import Field

from volcano_global.bounds import Timestamp
from volcano_global.schemas.common import ApiModel, DNSLabel, RequestBody


class TokenCreate(RequestBody):
    name: Annotated[str, Field(min_length=1, max_length=128)]
    role: Literal["admin", "reader", "queue-user"]
    queues: list[DNSLabel] = Field(
        default_factory=list, max_length=256, description="queue-user: the queues it may use"
    )
    expires_at: Timestamp | None = Field(
        None, description="Refused after this time; with a zone (Z or an offset)."
    )


class TokenOut(ApiModel):
    id: uuid.UUID
    name: str
    role: str
    queues: list[str]
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None


class TokenIssued(TokenOut):
    token: str = Field(description="The secret: shown this once, stored only as a hash.")


class TokenList(ApiModel):
    items: list[TokenOut]
