"""A copy report's cause on the wire: what an agent says round-trips; an agent from before
causes, or one with a cause this Global does not know, says none (the Global then reads its
words once, at the report: tests/global/scheduler/test_prefetch_cause.py)."""

from __future__ import annotations

import pytest

from volcano_global.rpc.copies import CopyCause, CopyPhase, CopyStatus
from volcano_global.rpc.v1 import agent_pb2 as pb

COPY_ID = "0b9c6a4e-0000-0000-0000-000000000001"


@pytest.mark.parametrize("cause", [c for c in CopyCause if c is not CopyCause.CLUSTER_LOST])
def test_an_agents_cause_round_trips(cause: CopyCause) -> None:
    status = CopyStatus(copy_id=COPY_ID, phase=CopyPhase.FAILED, message="x", cause=cause)
    assert CopyStatus.from_proto(status.to_proto()) == status


@pytest.mark.parametrize("value", [0, 99], ids=["older-agent", "newer-agent"])
def test_a_cause_unsaid_or_unknown_is_none(value: int) -> None:
    message = pb.DataCopyReport(copy_id=COPY_ID, phase=pb.COPY_PHASE_FAILED, message="x")
    message.cause = value
    assert CopyStatus.from_proto(message).cause is None


def test_the_globals_own_cause_is_not_on_the_wire() -> None:
    # A lost cluster's copies are failed by the Global; no agent says it.
    lost = CopyStatus(copy_id=COPY_ID, phase=CopyPhase.FAILED, cause=CopyCause.CLUSTER_LOST)
    assert lost.to_proto().cause == pb.COPY_CAUSE_UNSPECIFIED
