"""Loading submitted bodies: YAML bombs, deep nesting and odd documents are refused cleanly."""

from __future__ import annotations

import pytest

from tests.factories import BILLION_LAUGHS
from volcano_global.errors import Invalid
from volcano_global.jobspec import load_document
from volcano_global.jobspec.documents import unstorable_text

LIMITS = {"max_nodes": 10_000, "max_depth": 64}


def message(body: str, fmt: str = "yaml") -> str:
    with pytest.raises(Invalid) as caught:
        load_document(body.encode(), fmt=fmt, **LIMITS)
    return caught.value.message


def test_yaml_bomb_is_refused_before_expansion() -> None:
    assert message(BILLION_LAUGHS) == "document expands to more than 10000 nodes"


def test_small_anchors_still_work() -> None:
    doc = load_document(b"base: &b {cpu: 1}\nother: *b\n", fmt="yaml", **LIMITS)
    assert doc["other"] == {"cpu": 1}


def test_deep_yaml_nesting_is_refused() -> None:
    assert message("a: " + "[" * 100 + "]" * 100) == "document nests deeper than 64 levels"


@pytest.mark.parametrize("depth", [100, 100_000])
def test_deep_json_nesting_is_refused(depth: int) -> None:
    assert (
        message('{"a": ' + "[" * depth + "]" * depth + "}", fmt="json")
        == "document nests deeper than 64 levels"
    )


def test_multiple_documents_are_refused() -> None:
    assert message("a: 1\n---\nb: 2\n") == "expected exactly one YAML document, got 2"


def test_duplicate_keys_are_refused() -> None:
    assert "duplicate key 'replicas'" in message("replicas: 1\nreplicas: 2\n")


def test_non_mapping_is_refused() -> None:
    assert message("- a\n- b\n") == "the document must be a mapping (a Kubernetes object)"


def test_invalid_json_and_utf8_are_refused() -> None:
    assert message("{not json", fmt="json").startswith("invalid JSON:")
    with pytest.raises(Invalid) as caught:
        load_document(b"name: \xff\xfe", fmt="yaml", **LIMITS)
    assert "not valid UTF-8" in caught.value.message


def test_python_tags_are_not_constructed() -> None:
    assert "invalid YAML" in message("a: !!python/object/apply:os.system ['true']\n")


def test_a_yaml_error_is_one_line_with_its_place() -> None:
    # PyYAML's own text quotes the document around both marks over several lines.
    broken = "kind: Job\nmetadata:\n  name: x\n spec: [\n"
    assert message(broken) == (
        "invalid YAML at line 4, column 2: expected <block end>, but found "
        "'<block mapping start>' (while parsing a block mapping at line 1)"
    )
    assert message("a: 1\na: 2\n") == "invalid YAML at line 2, column 1: duplicate key 'a'"


def test_trailing_document_separator_is_accepted() -> None:
    doc = load_document(b"---\nkind: Job\n---\n", fmt="yaml", **LIMITS)
    assert doc == {"kind": "Job"}


def where(value: object) -> str | None:
    refused = unstorable_text(value)
    return None if refused is None else refused.field


def test_nul_characters_are_found_wherever_they_are_and_only_there() -> None:
    assert where({"spec": {"tasks": [{"name": "ok"}, {"args": ["a", "b\x00"]}]}}) == (
        "spec.tasks[1].args[1]"
    )
    assert where({"labels": {"team\x00": "x"}}) == "labels.team\x00"
    assert where({"text": "a literal \\u0000 is six characters, not a NUL"}) is None
    assert where({"when": object(), "n": [1, 2.5, None, True]}) is None  # not JSON: fine


def test_lone_surrogates_are_found_and_shown_escaped_but_pairs_and_astral_text_pass() -> None:
    assert where({"spec": {"args": ["ok", "x\udfff"]}}) == "spec.args[1]"
    assert where({"labels": {"a.b/\ud800": "x"}}) == 'labels["a.b/\\ud800"]'  # printable
    assert where({"labels": {"a.b/c": "\ud800"}}) == 'labels["a.b/c"]'
    assert where({"text": "rocket \U0001f680, \u00e9, a literal \\ud800"}) is None
    refused = unstorable_text(["\ud83d"])
    assert refused is not None and "lone UTF-16 surrogate" in refused.message
