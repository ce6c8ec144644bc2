"""Column types for JSON that has a schema: a pydantic model stored as its JSON and read back as
the model, so a reader gets a validated object once, when the row is loaded, instead of
validating the stored dict again at each place that uses it."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from pydantic import BaseModel
from sqlalchemy import JSON, TypeDecorator
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeEngine

M = TypeVar("M", bound=BaseModel)


def stored_form(value: BaseModel) -> dict[str, Any]:
    """The JSON a model is stored as: its fields by alias (camelCase for the jobspec models),
    as every job was stored since the first revision, so rows of before this type read back."""
    return value.model_dump(mode="json", by_alias=True)


class StoredModel(TypeDecorator[M], Generic[M]):
    """A `model` stored as JSON (JSONB on Postgres, like `base.JSONType`). Takes the model, or a
    dict already in its stored form (a bulk row, a migration's); gives the model."""

    impl = JSON
    cache_ok = True

    def __init__(self, model: type[M]) -> None:
        super().__init__()
        self.model = model

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        return dialect.type_descriptor(JSONB() if dialect.name == "postgresql" else JSON())

    def process_bind_param(self, value: M | dict[str, Any] | None, dialect: Dialect) -> Any:
        if value is None or isinstance(value, dict):
            return value
        if not isinstance(value, self.model):
            raise TypeError(f"expected a {self.model.__name__}, got {type(value).__name__}")
        return stored_form(value)

    def process_result_value(self, value: Any, dialect: Dialect) -> M | None:
        return None if value is None else self.model.model_validate(value)

    def coerce_compared_value(self, op: Any, value: Any) -> TypeEngine[Any]:
        # A key or a value compared inside the document (split_policy["minUnits"] > 0) is
        # plain JSON, not a model.
        return self.impl_instance.coerce_compared_value(op, value)
