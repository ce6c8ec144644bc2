"""Shared pieces of the API schemas."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator
from pydantic.alias_generators import to_camel

from volcano_global.jobspec.documents import unstorable_text

DNSLabel = Annotated[
    str,
    StringConstraints(min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"),
]


class ApiModel(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, from_attributes=True, extra="forbid"
    )


class RequestBody(ApiModel):
    """A request body's top-level model: its whole input is checked once (nested models and
    responses are not walked again)."""

    @model_validator(mode="before")
    @classmethod
    def _storable_text(cls, data: Any) -> Any:
        """Text the databases cannot hold (a NUL, a lone surrogate): refused, naming where.
        Pydantic lets a lone surrogate through a plain `str` field."""
        refused = unstorable_text(data)
        if refused is not None:
            raise ValueError(f"{refused.field or 'body'}: {refused.message}")
        return data


class StatusCause(ApiModel):
    field: str
    message: str


class StatusDetails(ApiModel):
    causes: list[StatusCause] = Field(default_factory=list)


class Status(ApiModel):
    """Error body, shaped like a Kubernetes `Status` so kubectl users read it at a glance."""

    kind: str = "Status"
    api_version: str = "v1"
    status: str = "Failure"
    reason: str
    message: str
    code: int
    details: StatusDetails | None = None


class ListMeta(ApiModel):
    continue_: str | None = Field(None, alias="continue")


class GpuCapacity(ApiModel):
    gpu_model: str
    total: int
    free: int
    used: int


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` entries for the error codes an operation can return."""
    return {code: {"model": Status} for code in codes}
