"""The agent's side of `DataPresence` without a Global: which labelled objects count
(`DataHeld`), and what goes on a stream when (`PresenceReports`): nothing to a Global from
before the message, the full list on connect and periodically, only new names between."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from core_agent.kubernetes.presence import SOURCE_LABEL, DataHeld
from core_agent.presence import PresenceReports
from volcano_global.rpc.v1 import agent_pb2 as pb


def obj(name: str, labels: dict[str, Any], phase: str = "Bound") -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}, "status": {"phase": phase}}


def test_bound_labelled_objects_name_the_data_and_a_bad_label_is_warned_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    held = DataHeld()
    held.pvcs.update(
        {
            "a/corpus": obj("corpus", {SOURCE_LABEL: "corpus-v3"}),
            "a/pending": obj("pending", {SOURCE_LABEL: "ckpt-7b"}, phase="Pending"),
            "a/lost": obj("lost", {SOURCE_LABEL: "old-data"}, phase="Lost"),
            "a/bad": obj("bad", {SOURCE_LABEL: "Corpus_V3"}),
            "a/other": obj("other", {"app": "x"}),
        }
    )
    held.datasets["b/imagenet"] = obj("imagenet", {SOURCE_LABEL: "imagenet"})
    held.datasets["b/loading"] = obj("loading", {SOURCE_LABEL: "laion"}, phase="NotBound")
    with caplog.at_level(logging.WARNING):
        assert held.present() == {"corpus-v3", "imagenet"}
        assert held.present() == {"corpus-v3", "imagenet"}
    assert [r.getMessage() for r in caplog.records] == [
        "PersistentVolumeClaim a/bad: label datadependency.volcano.sh/source='Corpus_V3' is "
        "not a DataSource name (a DNS subdomain): ignored"
    ]


def sent(messages: list[pb.AgentMessage]) -> list[tuple[str, list[str]]]:
    return [(m.data.reason, list(m.data.sources)) for m in messages]


def test_the_full_list_on_each_stream_and_periodically_new_names_between() -> None:
    present = {"corpus-v3"}
    reports = PresenceReports(lambda: set(present))
    reports.begin(pb.Welcome(data_presence=True))
    assert sent(reports.due("connect")) == [("connect", ["corpus-v3"])]
    assert reports.due("added") == []
    present.add("ckpt-7b")
    assert sent(reports.due("added")) == [("added", ["ckpt-7b"])]
    present.discard("corpus-v3")  # only adds: a name gone is not said
    assert reports.due("added") == []
    assert sent(reports.due("periodic")) == [("periodic", ["ckpt-7b"])]
    reports.begin(pb.Welcome(data_presence=True))  # a new stream: everything again
    present.add("corpus-v3")
    assert sent(reports.due("added")) == [("added", ["ckpt-7b", "corpus-v3"])]


def test_nothing_to_a_global_from_before_the_message_or_from_a_source_without_data() -> None:
    older = PresenceReports(lambda: {"corpus-v3"})
    older.begin(pb.Welcome())  # data_presence unset: it would end the stream
    assert older.due("connect") == [] and older.due("added") == []
    simulated = PresenceReports(None)
    simulated.begin(pb.Welcome(data_presence=True))
    assert simulated.due("connect") == []
