"""Column types for JSON that has a schema: a pydantic model (or a list of them) stored as its
JSON and read back as the model, so a reader gets a validated object once, when the row is
loaded, instead of validating the stored dict again at each place that uses it."""

from __future__ import annotations

import logging
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError
from sqlalchemy import JSON, TypeDecorator
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeEngine

log = logging.getLogger(__name__)
M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


def stored_form(value: BaseModel) -> dict[str, Any]:
    """The JSON a model is stored as: its fields by alias (camelCase for the jobspec models),
    as every job was stored since the first revision, so rows of before this type read back."""
    return value.model_dump(mode="json", by_alias=True)


class _StoredJSON(TypeDecorator[T], Generic[T, M]):
    """JSON (JSONB on Postgres, like `base.JSONType`) holding values of `model`."""

    impl = JSON

    def __init__(self, model: type[M]) -> None:
        super().__init__()
        self.model = model

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        return dialect.type_descriptor(JSONB() if dialect.name == "postgresql" else JSON())

    def _read(self, value: Any) -> M:
        """The stored value as the model. A row this release cannot read (written by a newer
        one, or by hand) is built unvalidated and logged: its own job fails where it is used
        (a round sets it aside with the reason), not every query that loads it."""
        try:
            return self.model.model_validate(value)
        except ValidationError as exc:
            log.warning("a stored %s does not validate: %s", self.model.__name__, exc)
            return self.model.model_construct(**value) if isinstance(value, dict) else value

    def _bound(self, value: Any) -> Any:
        """A dict is taken as already in its stored form (a bulk row, a migration's)."""
        if isinstance(value, dict):
            return value
        if not isinstance(value, self.model):
            raise TypeError(f"expected a {self.model.__name__}, got {type(value).__name__}")
        return stored_form(value)


class StoredModel(_StoredJSON[M, M]):
    """One model: takes the model (or its stored form), gives the model."""

    cache_ok = True  # (not inherited: SQLAlchemy asks each type class)

    def process_bind_param(self, value: M | dict[str, Any] | None, dialect: Dialect) -> Any:
        return None if value is None else self._bound(value)

    def process_result_value(self, value: Any, dialect: Dialect) -> M | None:
        return None if value is None else self._read(value)


class StoredModels(_StoredJSON[list[M], M]):
    """A list of models: takes the models (or their stored forms), gives the models."""

    cache_ok = True

    def process_bind_param(self, value: list[Any] | None, dialect: Dialect) -> Any:
        return None if value is None else [self._bound(v) for v in value]

    def process_result_value(self, value: Any, dialect: Dialect) -> list[M] | None:
        if value is None:
            return None
        return [self._read(v) for v in value]
