"""The `DataPresence` wire type: what counts as a DataSource name, the bound on names per
message, and a long list split over several messages."""

from __future__ import annotations

import pytest

from volcano_global.errors import Invalid
from volcano_global.rpc.data import MAX_SOURCES, DataPresence, is_data_source_name
from volcano_global.rpc.v1 import agent_pb2 as pb


@pytest.mark.parametrize(
    ("name", "valid"),
    [
        ("corpus-v3", True),
        ("corpus.v3.eu-west", True),
        ("a" * 253, True),
        ("a" * 254, False),
        ("", False),
        ("Corpus-v3", False),  # a label value may hold capitals: no DataSource name does
        ("corpus_v3", False),
        ("-corpus", False),
        ("corpus.", False),
    ],
)
def test_a_data_source_name_is_a_dns_subdomain(name: str, valid: bool) -> None:
    assert is_data_source_name(name) is valid


def test_a_valid_message_reads_back_as_sent() -> None:
    sent = DataPresence(sources=("ckpt-7b", "corpus-v3"), reason="connect")
    assert DataPresence.from_proto(sent.to_proto()) == sent


@pytest.mark.parametrize(
    ("message", "field"),
    [
        (pb.DataPresence(sources=["ok", "Not_OK"]), "data.sources[1]"),
        (pb.DataPresence(sources=[f"d{i}" for i in range(MAX_SOURCES + 1)]), "data.sources"),
        (pb.DataPresence(sources=["ok"], reason="x" * 33), "data.reason"),
        (pb.DataPresence(sources=["ok"], reason="con\nnect"), "data.reason"),
    ],
)
def test_a_message_that_breaks_the_rules_is_refused_naming_the_field(
    message: pb.DataPresence, field: str
) -> None:
    with pytest.raises(Invalid) as caught:
        DataPresence.from_proto(message)
    [error] = caught.value.errors
    assert error.field == field


def test_a_long_list_goes_in_several_messages_each_name_once() -> None:
    names = [f"d{i:05d}" for i in range(MAX_SOURCES + 10)] + ["d00000"]
    messages = DataPresence.messages(names, reason="connect")
    assert [len(m.sources) for m in messages] == [MAX_SOURCES, 10]
    assert [n for m in messages for n in m.sources] == sorted(set(names))
    for message in messages:  # each one the Global takes
        DataPresence.from_proto(message.to_proto())
    assert DataPresence.messages([], reason="added") == []
