"""Kubernetes label and field selectors (`app=x,tier in (a,b),!canary`, `metadata.name=x`),
parsed once per request and matched against an object's labels or fields.

The parser is a hand-written tokenizer and recursive-descent reader, one pass over the text
(apimachinery's `pkg/labels/selector.go` grammar): no regular expression sees the selector, so
a hostile 60 KB selector costs microseconds, not seconds. A selector longer than
`SelectorLimits.max_length` or with more than `max_requirements` requirements is refused
before it is read, as is a key or value the API server would refuse (a qualified name, a
value of at most 63 characters), with 400 BadRequest naming the parameter, as kube-apiserver
answers a selector it cannot parse."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from volcano_global.errors import BadRequest

Requirement = Callable[[Mapping[str, str]], bool]
FIELDS = ("metadata.name", "metadata.namespace")

_SPECIAL = frozenset("!=(),<>")
_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_NAME_CHARS = _ALNUM | frozenset("-_.")
_DNS_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-")
_OPERATORS = ("!=", "==", "=")  # a field selector's, tried in this order as apimachinery does


@dataclass(frozen=True)
class SelectorLimits:
    """What a selector may cost (settings `kube.selector_max_length`, `..._requirements`)."""

    max_length: int = 4096
    max_requirements: int = 100


@dataclass(frozen=True)
class Selector:
    requirements: tuple[Requirement, ...] = ()

    def matches(self, values: Mapping[str, str]) -> bool:
        return all(requirement(values) for requirement in self.requirements)


def _refuse(parameter: str, why: str) -> BadRequest:
    return BadRequest.one(parameter, why)


def _within(text: str, parameter: str, limits: SelectorLimits) -> None:
    if len(text) > limits.max_length:
        raise _refuse(
            parameter,
            f"is {len(text)} characters, more than the {limits.max_length} this server "
            "accepts (setting kube.selector_max_length)",
        )


def tokens(text: str, parameter: str = "labelSelector") -> list[str]:
    """The selector's tokens in one pass: identifiers, `in`/`notin`, and the operators
    `!`, `=`, `==`, `!=`, `(`, `)`, `,`, `<`, `>`."""
    found: list[str] = []
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char.isspace():
            i += 1
        elif char in "!=" and i + 1 < n and text[i + 1] == "=":
            found.append(char + "=")
            i += 2
        elif char in _SPECIAL:
            found.append(char)
            i += 1
        else:
            start = i
            while i < n and not text[i].isspace() and text[i] not in _SPECIAL:
                i += 1
            found.append(text[start:i])
    return found


def _is_name(text: str, most: int) -> bool:
    """A qualified name's name part or a label value: alphanumeric at both ends, `-_.`
    between, at most `most` characters."""
    return (
        0 < len(text) <= most
        and text[0] in _ALNUM
        and text[-1] in _ALNUM
        and all(c in _NAME_CHARS for c in text)
    )


def _is_dns_subdomain(text: str) -> bool:
    if not 0 < len(text) <= 253:
        return False
    return all(
        label and label[0] != "-" and label[-1] != "-" and all(c in _DNS_CHARS for c in label)
        for label in text.split(".")
    )


def _check_key(key: str, parameter: str) -> str:
    prefix, slash, name = key.rpartition("/")
    if not _is_name(name, 63) or (slash and not _is_dns_subdomain(prefix)):
        raise _refuse(
            parameter,
            f"invalid label key {key[:80]!r}: a qualified name (an optional DNS subdomain "
            "prefix of at most 253 characters and '/', then at most 63 alphanumerics, "
            "'-', '_' or '.', alphanumeric at both ends)",
        )
    return key


def _check_value(value: str, parameter: str) -> str:
    if value and not _is_name(value, 63):
        raise _refuse(
            parameter,
            f"invalid label value {value[:80]!r}: at most 63 alphanumerics, '-', '_' or '.', "
            "alphanumeric at both ends (or empty)",
        )
    return value


class _Reader:
    """Reads requirements off the token list, each token once."""

    def __init__(self, found: list[str], parameter: str) -> None:
        self.found, self.at, self.parameter = found, 0, parameter

    def peek(self) -> str | None:
        return self.found[self.at] if self.at < len(self.found) else None

    def take(self) -> str | None:
        token = self.peek()
        self.at += 1
        return token

    def identifier(self, what: str) -> str:
        token = self.take()
        if token is None or token in _SPECIAL or token in ("==", "!="):
            raise _refuse(self.parameter, f"unable to parse requirement: expected {what}")
        return token

    def values(self) -> frozenset[str]:
        if self.take() != "(":
            raise _refuse(self.parameter, "unable to parse requirement: expected '(' after in")
        members: set[str] = set()
        expect_value = True
        while True:
            token = self.take()
            if token == ")":
                return frozenset(members)
            if token == ",":
                expect_value = True
                continue
            if token is None or not expect_value or token in _SPECIAL or token in ("==", "!="):
                raise _refuse(
                    self.parameter, "unable to parse requirement: expected a value or ')'"
                )
            members.add(_check_value(token, self.parameter))
            expect_value = False

    def requirement(self) -> Requirement:
        if self.peek() == "!":
            self.take()
            key = _check_key(self.identifier("a key after '!'"), self.parameter)
            return lambda labels: key not in labels
        key = _check_key(self.identifier("a key"), self.parameter)
        op = self.peek()
        if op in (None, ","):
            return lambda labels: key in labels
        self.take()
        if op in ("in", "notin"):
            members = self.values()
            if op == "in":
                return lambda labels: labels.get(key) in members
            return lambda labels: labels.get(key) not in members
        if op in ("=", "==", "!="):
            value = "" if self.peek() in (None, ",") else self.identifier("a value")
            value = _check_value(value, self.parameter)
            if op == "!=":
                return lambda labels: labels.get(key) != value
            return lambda labels: labels.get(key) == value
        if op in ("<", ">"):
            return _compare(key, op, self.identifier("an integer"), self.parameter)
        raise _refuse(self.parameter, f"unable to parse requirement: unexpected {op[:80]!r}")


def _compare(key: str, op: str, bound_text: str, parameter: str) -> Requirement:
    """`key>3`, `key<3`: the label's value read as an integer (a label that is not one does
    not match), as the API server's Gt and Lt."""
    if not bound_text.lstrip("-").isdigit() or len(bound_text) > 19:
        raise _refuse(parameter, f"unable to parse requirement: {bound_text[:80]!r} is no integer")
    bound = int(bound_text)

    def requirement(labels: Mapping[str, str]) -> bool:
        value = labels.get(key)
        if value is None or not value.lstrip("-").isdigit():
            return False
        return int(value) > bound if op == ">" else int(value) < bound

    return requirement


def label_selector(text: str | None, limits: SelectorLimits | None = None) -> Selector:
    if not text:
        return Selector()
    limits = limits or SelectorLimits()
    _within(text, "labelSelector", limits)
    reader = _Reader(tokens(text), "labelSelector")
    requirements: list[Requirement] = []
    while reader.peek() is not None:
        if len(requirements) == limits.max_requirements:
            raise _refuse(
                "labelSelector",
                f"more than {limits.max_requirements} requirements "
                "(setting kube.selector_max_requirements)",
            )
        requirements.append(reader.requirement())
        separator = reader.take()
        if separator not in (None, ","):
            raise _refuse(
                "labelSelector", f"unable to parse requirement: expected ',' at {separator[:80]!r}"
            )
    return Selector(tuple(requirements))


def _split_terms(text: str) -> list[str]:
    """The terms between unescaped commas (`\\,` is a comma inside a value)."""
    terms, current, escaped = [], [], False
    for char in text:
        if escaped:
            current.append("\\" + char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == ",":
            terms.append("".join(current))
            current = []
        else:
            current.append(char)
    terms.append("".join(current) + ("\\" if escaped else ""))
    return [t for t in terms if t]


def _unescape(value: str, parameter: str) -> str:
    out, escaped = [], False
    for char in value:
        if escaped:
            if char not in "\\,=":
                raise _refuse(parameter, f"invalid escape sequence \\{char} in {value[:80]!r}")
            out.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char in ",=":
            raise _refuse(parameter, f"unescaped {char!r} in {value[:80]!r}")
        else:
            out.append(char)
    if escaped:
        raise _refuse(parameter, f"{value[:80]!r} ends with an escape")
    return "".join(out)


def _field_term(term: str) -> Requirement:
    for op in _OPERATORS:
        field, found, value = term.partition(op)
        if found:
            break
    else:
        raise _refuse("fieldSelector", f"invalid selector: {term[:80]!r}; can't understand it")
    field = field.strip()
    if field not in FIELDS:
        raise _refuse(
            "fieldSelector",
            f"field label not supported: {field[:80]!r} (only {', '.join(FIELDS)})",
        )
    wanted = _unescape(value.strip(), "fieldSelector")
    if op == "!=":
        return lambda fields: fields.get(field) != wanted
    return lambda fields: fields.get(field) == wanted


def field_selector(text: str | None, limits: SelectorLimits | None = None) -> Selector:
    """Field selectors on the fields every Kubernetes object supports (the name and the
    namespace), with =, == and !=, as the API server takes them for custom resources."""
    if not text:
        return Selector()
    limits = limits or SelectorLimits()
    _within(text, "fieldSelector", limits)
    terms = _split_terms(text)
    if len(terms) > limits.max_requirements:
        raise _refuse(
            "fieldSelector",
            f"more than {limits.max_requirements} requirements "
            "(setting kube.selector_max_requirements)",
        )
    return Selector(tuple(_field_term(term) for term in terms))
