"""Load a submitted YAML or JSON body safely: one document, bounded expansion and depth."""

from __future__ import annotations

import json
import re
from typing import Any

import orjson
import yaml

from volcano_global.errors import FieldError, Invalid
from volcano_global.jobspec.fields import child


class _TooDeep(yaml.YAMLError):
    pass


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader whose mappings refuse duplicate keys (YAML says keys are unique) and whose
    composer stops at `max_depth` levels: PyYAML composes recursively, so a deep document
    (`[[[[...`) would otherwise exhaust the interpreter's stack while it is parsed."""

    max_depth = 64
    _depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        self._depth += 1
        try:
            if self._depth > self.max_depth:
                raise _TooDeep(f"document nests deeper than {self.max_depth} levels")
            return super().compose_node(parent, index)  # type: ignore[no-any-return]
        finally:
            self._depth -= 1


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    result: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, str | int | float | bool) and key is not None:
            raise yaml.constructor.ConstructorError(
                None, None, "mapping keys must be scalars", key_node.start_mark
            )
        if key in result:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        result[key] = loader.construct_object(value_node, deep=True)
    return result


_StrictLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _construct_mapping,  # type: ignore[arg-type]
)


def yaml_problem(exc: yaml.YAMLError) -> str:
    """PyYAML's error in one line with its place (`invalid YAML at line 5, column 2: expected
    <block end>, but found '<block mapping start>' (while parsing a block mapping at line 1)`)
    instead of its dump of both marks with a snippet of the document each."""
    if not isinstance(exc, yaml.MarkedYAMLError) or not exc.problem:
        return f"invalid YAML: {exc}"
    mark, context = exc.problem_mark, ""
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    if exc.context:
        at = f" at line {exc.context_mark.line + 1}" if exc.context_mark else ""
        context = f" ({exc.context}{at})"
    return f"invalid YAML{where}: {exc.problem}{context}"


def load_document(body: bytes | str, *, fmt: str, max_nodes: int, max_depth: int) -> dict[str, Any]:
    """Parse one JSON or YAML document into a dict. YAML alias expansion ("billion laughs")
    and nesting are bounded *before* the document is built."""
    try:
        text = body.decode("utf-8") if isinstance(body, bytes) else body
    except UnicodeDecodeError as exc:
        raise Invalid.one(
            "", f"the document is not valid UTF-8 ({exc.reason} at byte {exc.start})"
        ) from None
    if fmt == "json":
        try:
            data = json.loads(text)
        except RecursionError:
            raise Invalid.one("", f"document nests deeper than {max_depth} levels") from None
        except ValueError as exc:
            raise Invalid.one("", f"invalid JSON: {exc}") from None
        _check_depth(data, max_depth)
    else:
        data = load_yaml(text, max_nodes=max_nodes, max_depth=max_depth)
    if not isinstance(data, dict):
        raise Invalid.one("", "the document must be a mapping (a Kubernetes object)")
    refused = unstorable_text(data)
    if refused is not None:
        raise Invalid([refused])
    return data


NUL_REFUSED = "NUL (\\u0000) characters are not allowed"
SURROGATE_REFUSED = (
    "a lone UTF-16 surrogate (U+D800 to U+DFFF) is not a Unicode character: not allowed "
    "(send the character itself, or in JSON an escaped surrogate pair)"
)
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def unstorable_text(value: Any) -> FieldError | None:
    """The first string (or key) the databases cannot hold, and why, else None: Postgres text
    holds no NUL character, and neither database (nor a JSON response) a lone UTF-16
    surrogate, which JSON's `\\ud800` and YAML's escapes produce. One encoding (orjson, in
    Rust) clears almost every input without walking it in Python: it escapes every NUL as
    `\\u0000` and refuses surrogates; a hit (or a value JSON cannot encode) is walked."""
    try:
        if b"\\u0000" not in orjson.dumps(value, default=str):
            return None
    except (TypeError, ValueError):
        pass
    return _text_walk(value, "")


def _refusal(text: str) -> str | None:
    if "\x00" in text:
        return NUL_REFUSED
    if not text.isascii() and _SURROGATE.search(text):
        return SURROGATE_REFUSED
    return None


def _text_walk(value: Any, path: str) -> FieldError | None:
    if isinstance(value, str):
        why = _refusal(value)
        return FieldError(path, why) if why else None
    if isinstance(value, dict):
        for key, item in value.items():
            here = _key_path(path, key)
            why = _refusal(key) if isinstance(key, str) else None
            if why is not None:
                return FieldError(here, why)
            found = _text_walk(item, here)
            if found is not None:
                return found
    if isinstance(value, list):
        for i, item in enumerate(value):
            found = _text_walk(item, f"{path}[{i}]")
            if found is not None:
                return found
    return None


def _key_path(path: str, key: Any) -> str:
    if not isinstance(key, str):
        return f"{path}.{key}" if path else str(key)
    shown = shown_text(key)
    return child(path, key) if shown == key else f'{path}["{shown}"]'


def shown_text(text: str) -> str:
    """`text` as an answer can carry it: a lone surrogate as its escape (`\\ud800`)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def load_yaml(text: str, *, max_nodes: int, max_depth: int) -> Any:
    """One YAML document (JSON is YAML), its expansion and depth bounded while it is read."""
    composer = _StrictLoader(text)
    composer.max_depth = max_depth
    nodes = []
    try:
        while composer.check_node():
            nodes.append(composer.get_node())
    except _TooDeep as exc:
        raise Invalid.one("", str(exc)) from None
    except yaml.YAMLError as exc:
        raise Invalid.one("", yaml_problem(exc)) from None
    finally:
        composer.dispose()
    nodes = [n for n in nodes if n is not None and not _is_empty(n)]
    if len(nodes) != 1:
        raise Invalid.one("", f"expected exactly one YAML document, got {len(nodes)}")
    _check_node_budget(nodes[0], max_nodes=max_nodes, max_depth=max_depth)
    loader = _StrictLoader("")
    try:
        return loader.construct_document(nodes[0])
    except yaml.YAMLError as exc:
        raise Invalid.one("", yaml_problem(exc)) from None
    finally:
        loader.dispose()


def _is_empty(node: yaml.Node) -> bool:
    """An empty document, e.g. after a trailing `---` as many manifests end."""
    return (
        isinstance(node, yaml.ScalarNode)
        and node.tag.endswith(":null")
        and node.value in ("", "~", "null")
    )


def _check_node_budget(root: yaml.Node, *, max_nodes: int, max_depth: int) -> None:
    """Count nodes as if every alias were expanded; stop as soon as the budget is spent."""
    budget = max_nodes
    stack: list[tuple[yaml.Node, int]] = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        budget -= 1
        if budget < 0:
            raise Invalid.one("", f"document expands to more than {max_nodes} nodes")
        if depth > max_depth:
            raise Invalid.one("", f"document nests deeper than {max_depth} levels")
        if isinstance(node, yaml.SequenceNode):
            stack.extend((child, depth + 1) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                stack.append((key, depth + 1))
                stack.append((value, depth + 1))


def _check_depth(data: Any, max_depth: int) -> None:
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > max_depth:
            raise Invalid.one("", f"document nests deeper than {max_depth} levels")
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)


# Public names for the multi-document reader (jobspec/manifests.py).
check_node_budget = _check_node_budget
is_empty_node = _is_empty
check_depth = _check_depth
