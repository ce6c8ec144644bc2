"""Label and field selectors: the grammar kube-apiserver takes, the keys and values it
refuses, the limits, and parsing work that grows linearly with the selector's size (the
regular expressions this parser replaced took 5 s on 20,000 spaces, issue 38 item 4)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import pytest

from volcano_global.errors import BadRequest
from volcano_global.services.kube import selectors
from volcano_global.services.kube.selectors import SelectorLimits, field_selector, label_selector

LABELS = {"team": "llm", "tier": "gold", "size": "7", "example.com/owner": "ana"}
ROOMY = SelectorLimits(max_length=1_000_000, max_requirements=100_000)


@pytest.mark.parametrize(
    ("text", "matches"),
    [
        ("team=llm", True),
        ("team==llm", True),
        ("team!=llm", False),
        ("team in (llm, vision)", True),
        ("team notin (llm)", False),
        ("team", True),
        ("!team", False),
        ("!absent", True),
        ("team=llm,tier=gold", True),
        ("team=llm, tier=silver", False),
        ("example.com/owner=ana", True),
        ("size>3,size<10", True),
        ("size>7", False),
        ("team=", False),
        ("absent=", False),  # as the API server: `=` needs the label
        ("team in (llm,)", True),
        ("  team  =  llm  ", True),
    ],
)
def test_the_grammar_of_the_api_server(text: str, matches: bool) -> None:
    assert label_selector(text).matches(LABELS) is matches


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("team=llm x", "expected ','"),
        ("team in (llm", "expected a value or ')'"),
        ("team in llm", "expected '(' after in"),
        ("!team=llm", "expected ','"),
        ("=llm", "expected a key"),
        ("-team=llm", "invalid label key"),
        ("Example.com/team=llm", "invalid label key"),
        ("a/b/c=d", "invalid label key"),
        ("k" * 64 + "=v", "invalid label key"),
        ("team=" + "v" * 64, "invalid label value"),
        ("team=llm-", "invalid label value"),
        ("size>x", "is no integer"),
    ],
)
def test_refusals_name_the_parameter_and_the_rule(text: str, names: str) -> None:
    with pytest.raises(BadRequest) as refused:
        label_selector(text)
    assert refused.value.errors[0].field == "labelSelector"
    assert names in refused.value.errors[0].message


def test_the_length_and_requirement_limits_are_named() -> None:
    with pytest.raises(BadRequest) as long:
        label_selector("a=" + " " * 60_000 + "b")
    assert "kube.selector_max_length" in long.value.message
    assert "60003 characters, more than the 4096" in long.value.message
    with pytest.raises(BadRequest) as many:
        label_selector(",".join(f"k{i}" for i in range(101)))
    assert "more than 100 requirements (setting kube.selector_max_requirements)" in (
        many.value.message
    )
    with pytest.raises(BadRequest) as fields:
        field_selector("metadata.name=" + "x" * 5000)
    assert fields.value.errors[0].field == "fieldSelector"


def test_field_selectors_take_the_name_and_namespace_with_escapes() -> None:
    fields = {"metadata.name": "a,b", "metadata.namespace": "ml"}
    assert field_selector(r"metadata.name=a\,b,metadata.namespace==ml").matches(fields)
    assert not field_selector("metadata.namespace!=ml").matches(fields)
    with pytest.raises(BadRequest, match=r"field label not supported: 'spec\.queue'"):
        field_selector("spec.queue=x")
    with pytest.raises(BadRequest, match="can't understand"):
        field_selector("metadata.name")


def _line_events(call: Callable[[], Any]) -> int:
    """Python lines run by `call`: the parser's work, whatever the machine's load."""
    count = 0

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "line":
            count += 1
        return trace

    sys.settrace(trace)
    try:
        call()
    except BadRequest:
        pass
    finally:
        sys.settrace(None)
    return count


@pytest.mark.parametrize(
    "hostile",
    [
        lambda n: "a=" + " " * n + "!",  # 5 s at 20,000 with the regular expressions
        lambda n: "a" * 100 + " " * n + "x",
        lambda n: "!" + " " * n + "a" + " " * n + "!",
        lambda n: "k in (" + ",".join("v" for _ in range(n // 2)) + ")",
        lambda n: ",".join("k" for _ in range(n // 2)),
    ],
)
def test_parsing_work_grows_linearly(hostile: Callable[[int], str]) -> None:
    small = _line_events(lambda: label_selector(hostile(5_000), ROOMY))
    large = _line_events(lambda: label_selector(hostile(20_000), ROOMY))
    assert large <= 4.5 * small, (small, large)


def test_the_parser_uses_no_regular_expression() -> None:
    # A regular expression over the whole selector is how the quadratic cost came in.
    assert "re" not in vars(selectors)
