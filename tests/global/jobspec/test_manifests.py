"""Splitting a file of documents and naming each by group and kind (jobspec/manifests.py)."""

from __future__ import annotations

from volcano_global.jobspec.manifests import MAX_DOCUMENTS, split_manifests

FILE = """\
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: llm}
---
# an empty document (a comment only) is not counted
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
---
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: train, namespace: ml}
spec: {tasks: []}
---
"""


def split(text: str, **limits: int) -> list:
    return split_manifests(
        text,
        fmt="yaml",
        max_nodes=limits.get("max_nodes", 10_000),
        max_depth=limits.get("max_depth", 32),
    )


def test_documents_come_in_order_with_their_group_and_kind() -> None:
    found = split(FILE)
    assert [(m.index, m.group, m.kind, m.name, m.namespace) for m in found] == [
        (0, "scheduling.volcano.sh", "Queue", "llm", None),
        (1, "scheduling.k8s.io", "PriorityClass", "high", None),
        (2, "batch.volcano.sh", "Job", "train", "ml"),
    ]
    assert all(m.document is not None and not m.errors for m in found)
    assert found[2].label == "document 2 (Job train)"


def test_a_document_without_kind_or_not_a_mapping_is_an_error_of_its_own() -> None:
    found = split("kind: Job\n---\n- a list\n---\napiVersion: v1\nkind: ConfigMap\n")
    assert [e.field for e in found[0].errors] == ["apiVersion"]
    assert found[1].errors[0].message == "must be a mapping (a Kubernetes object)"
    assert (found[2].group, found[2].kind, found[2].errors) == ("", "ConfigMap", [])


def test_each_document_is_bounded_as_one_submission_is() -> None:
    laughs = "a: &a [x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a]\n"
    laughs += "c: [*b, *b, *b, *b, *b, *b, *b, *b]\n"
    found = split("apiVersion: v1\nkind: A\n---\n" + laughs, max_nodes=200)
    assert found[0].errors == []
    assert "expands to more than 200 nodes" in found[1].errors[0].message
    duplicate = split("apiVersion: v1\nkind: A\nkind: B\n")
    assert "duplicate key 'kind'" in duplicate[0].errors[0].message


def test_a_syntax_error_stops_the_reading_there() -> None:
    found = split("apiVersion: v1\nkind: A\n---\nkind: [\n---\napiVersion: v1\nkind: C\n")
    assert [m.kind for m in found] == ["A", None]
    assert found[1].errors[0].message.startswith("invalid YAML")


def test_too_many_documents_are_refused_after_the_limit() -> None:
    text = "---\n".join("apiVersion: v1\nkind: A\n" for _ in range(MAX_DOCUMENTS + 3))
    found = split(text)
    assert len(found) == MAX_DOCUMENTS + 1
    assert found[-1].errors[0].message == f"more than {MAX_DOCUMENTS} documents"


def test_json_body_and_json_list() -> None:
    one = split_manifests('{"apiVersion": "v1", "kind": "A"}', fmt="json", max_nodes=9, max_depth=9)
    assert [m.kind for m in one] == ["A"]
    listed = split_manifests(
        '{"kind": "List", "apiVersion": "v1", "items": [{"apiVersion": "v1", "kind": "B"}, 3]}',
        fmt="json",
        max_nodes=9,
        max_depth=9,
    )
    assert [m.kind for m in listed] == ["B", None] and listed[1].errors


def test_a_json_item_nested_too_deep_is_refused() -> None:
    deep = '{"apiVersion": "v1", "kind": "A", "spec": ' + "[" * 20 + "]" * 20 + "}"
    (found,) = split_manifests(deep, fmt="json", max_nodes=99, max_depth=10)
    assert "nests deeper than 10 levels" in found.errors[0].message
