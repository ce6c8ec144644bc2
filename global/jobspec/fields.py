"""Reading fields out of an untyped Kubernetes object while collecting every error with its
path, the way the API server reports them."""

from __future__ import annotations

import re
from typing import Any

from volcano_global.errors import FieldError, Invalid

INT32_MAX = 2**31 - 1
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def child(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    if "/" in key or "." in key:
        return f'{path}["{key}"]'
    return f"{path}.{key}" if path else key


class Checker:
    def __init__(self) -> None:
        self.errors: list[FieldError] = []

    def fail(self, path: str, message: str) -> None:
        self.errors.append(FieldError(path, message))

    def raise_if_any(self) -> None:
        if self.errors:
            raise Invalid(self.errors)

    def mapping(
        self, obj: dict[str, Any], key: str, path: str, *, required: bool = False
    ) -> dict[str, Any] | None:
        value = obj.get(key)
        if value is None:
            if required:
                self.fail(child(path, key), "required")
            return None
        if not isinstance(value, dict):
            self.fail(child(path, key), "must be a mapping")
            return None
        return value

    def sequence(
        self, obj: dict[str, Any], key: str, path: str, *, required: bool = False
    ) -> list[Any] | None:
        value = obj.get(key)
        if value is None:
            if required:
                self.fail(child(path, key), "required")
            return None
        if not isinstance(value, list):
            self.fail(child(path, key), "must be a list")
            return None
        if required and not value:
            self.fail(child(path, key), "must not be empty")
        return value

    def string(
        self, obj: dict[str, Any], key: str, path: str, *, required: bool = False
    ) -> str | None:
        value = obj.get(key)
        if value is None or value == "":
            if required:
                self.fail(child(path, key), "required")
            return None
        if not isinstance(value, str):
            self.fail(child(path, key), "must be a string")
            return None
        return value

    def dns_label(
        self, obj: dict[str, Any], key: str, path: str, *, required: bool = False
    ) -> str | None:
        value = self.string(obj, key, path, required=required)
        if value is not None and not is_dns_label(value):
            self.fail(
                child(path, key),
                f"{value!r} is not a valid name: at most 63 lowercase letters, digits or '-', "
                "starting and ending with a letter or digit",
            )
            return None
        return value

    def integer(
        self,
        obj: dict[str, Any],
        key: str,
        path: str,
        *,
        required: bool = False,
        minimum: int | None = None,
        maximum: int = INT32_MAX,
    ) -> int | None:
        value = obj.get(key)
        if value is None:
            if required:
                self.fail(child(path, key), "required")
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(child(path, key), "must be an integer")
            return None
        if minimum is not None and value < minimum:
            self.fail(child(path, key), f"must be >= {minimum}")
            return None
        if value > maximum:
            self.fail(child(path, key), f"must be <= {maximum}")
            return None
        return value

    def unknown_fields(self, obj: dict[str, Any], allowed: frozenset[str], path: str) -> None:
        for key in obj:
            if key not in allowed:
                self.fail(child(path, str(key)), "unknown field")


def is_dns_label(value: str) -> bool:
    return len(value) <= 63 and bool(_DNS_LABEL.fullmatch(value))


def is_job_name(value: str) -> bool:
    """A name Kubernetes and Volcano both accept for a Job: a DNS-1123 subdomain (dot-separated
    DNS labels, as the API server checks a custom resource's name) of at most 63 characters
    (Volcano's webhook checks it as a qualified name), e.g. `llama3.1-pretrain`."""
    return len(value) <= 63 and all(_DNS_LABEL.fullmatch(part) for part in value.split("."))
