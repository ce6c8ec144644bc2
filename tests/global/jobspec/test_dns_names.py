"""Names are matched whole: a trailing newline, which a regex's `$` lets through, is not part
of a Kubernetes name."""

from __future__ import annotations

import pytest

from tests.data_documents import data_source
from volcano_global.errors import Invalid
from volcano_global.jobspec.data_sources import read_data_source
from volcano_global.jobspec.fields import is_dns_label, is_job_name


@pytest.mark.parametrize("value", ["ml\n", "ml\n\n", "-ml", "ml-", "Ml", "m_l", "", "a" * 64])
def test_what_is_not_a_dns_label(value: str) -> None:
    assert not is_dns_label(value)


@pytest.mark.parametrize("value", ["train.v2\n", "train..v2", ".train"])
def test_what_is_not_a_job_name(value: str) -> None:
    assert not is_job_name(value)


def test_a_data_source_named_with_a_trailing_newline_is_refused_naming_the_field() -> None:
    document = data_source("corpus-v3\n")
    with pytest.raises(Invalid) as refused:
        read_data_source(document)
    assert [e.field for e in refused.value.errors] == ["metadata.name"]


def test_names_kubernetes_accepts() -> None:
    assert all(is_dns_label(v) for v in ("ml", "a", "team-a1", "a" * 63))
    assert is_job_name("train.v2")
