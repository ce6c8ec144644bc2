"""The wire's domain types: an assignment goes outbox payload -> protobuf -> agent unchanged,
payloads of the previous release still read, and phases map to the protocol's enum."""

from __future__ import annotations

import dataclasses
import json

import pytest
from google.protobuf.message import Message

from tests.factories import share_assignment
from volcano_global.rpc.shares import (
    ACCEPTED_PHASES,
    ShareAssignment,
    ShareCancellation,
    SharePhase,
    ShareStatus,
    StagingItem,
    phases_accepted,
    report_for,
)
from volcano_global.rpc.v1 import agent_pb2 as pb

ASSIGNMENT = share_assignment(  # every field set, none to its default
    rank_offset=8,
    world_pods=12,
    cluster_index=1,
    cluster_count=3,
    manifest_json='{"kind": "Job"}',
    gpus_per_pod=8,
    gpu_model="H100",
    domains={"tor0": 1, "tor1": 1},
    duration_seconds=5400.0,
    job_token="vgj_secret",
)
STAGED = dataclasses.replace(
    ASSIGNMENT,
    staging=(
        StagingItem(
            data_source="corpus-v3",
            bytes=40 * 2**40,
            source_cluster="gpu-west",
            source_uri="s3://corpora/v3/",
            destination="/data/corpus-v3",
            gbps=100.0,
        ),
        StagingItem(data_source="tokenizer", bytes=2**30, destination="/data/tok"),
    ),
)


def over_the_wire(message: pb.ShareAssignment) -> pb.ShareAssignment:
    return pb.ShareAssignment.FromString(message.SerializeToString())


@pytest.mark.parametrize("assignment", [ASSIGNMENT, STAGED], ids=["plain", "staging"])
def test_an_assignment_reaches_the_agent_as_the_outbox_wrote_it(
    assignment: ShareAssignment,
) -> None:
    stored = ShareAssignment.from_payload(json.loads(json.dumps(assignment.to_payload())))
    sent = stored.to_proto()
    assert ShareAssignment.from_proto(over_the_wire(sent)) == assignment
    cancellation = ShareCancellation(placement_id="p", job_uid="u", reason="job cancelled")
    sent_cancellation = ShareCancellation.from_payload(cancellation.to_payload()).to_proto()
    assert ShareCancellation.from_proto(sent_cancellation) == cancellation


@pytest.mark.parametrize(
    ("kind", "message", "not_in_kind"),
    [
        (ShareAssignment, pb.ShareAssignment, set()),
        (StagingItem, pb.StagingItem, set()),
        (ShareCancellation, pb.ShareCancellation, set()),
        # the agent's client numbers it; phase_name is the phase again, for older Globals
        (ShareStatus, pb.JobStatusReport, {"report_seq", "phase_name"}),
    ],
)
def test_the_types_carry_every_field_of_their_messages(
    kind: type, message: type[Message], not_in_kind: set[str]
) -> None:
    """A field added to the .proto but not to its type would be dropped on the way."""
    names = {f.name for f in dataclasses.fields(kind)}
    assert names == set(message.DESCRIPTOR.fields_by_name) - not_in_kind


def test_payloads_of_the_previous_release_still_read() -> None:
    """Outbox rows outlive a restart: the keys the previous writer used are still the format
    (a row it wrote reads, and one this version writes reads in the previous release)."""
    previous = {
        "placement_id": "0123abcd-0000-0000-0000-000000000000",
        "generation": 1,
        "job_uid": "u",
        "job_name": "train",
        "namespace": "ml",
        "pods": 2,
        "rank_offset": 8,
        "world_pods": 12,
        "gpus_per_pod": 8,
        "gpu_model": "H100",
        "domains": {"tor0": 1, "tor1": 1},
        "duration_seconds": 5400.0,
        "manifest_json": '{"kind": "Job"}',
        "cluster_index": 1,
        "cluster_count": 3,
        "rendezvous_address": "train-0123abcd-task-0.train-0123abcd.ml.svc:29500",
        "member_job_name": "train-0123abcd",
        "job_token": "vgj_secret",
    }
    assert ShareAssignment.from_payload(previous) == ASSIGNMENT
    # This version adds the queue's document; the previous release ignores keys it does not know.
    assert ASSIGNMENT.to_payload() == {**previous, "queue_json": "", "staging": []}
    scrubbed = {k: v for k, v in previous.items() if k != "job_token"}
    assert ShareAssignment.from_payload({**scrubbed, "later": 1}).job_token == ""
    cancel = {"placement_id": "p", "job_uid": "u", "reason": "gang withdrawn"}
    assert ShareCancellation.from_payload(cancel).to_payload() == cancel


@pytest.mark.parametrize("phase", [p for p in SharePhase if p is not SharePhase.ASSIGNED])
def test_each_reported_phase_has_its_value_on_the_wire(phase: SharePhase) -> None:
    value = phase.to_proto()
    assert pb.SharePhase.Name(value) == f"SHARE_PHASE_{phase.name}"
    assert SharePhase.from_proto(value) is phase


def test_what_is_not_a_reported_phase_is_refused() -> None:
    with pytest.raises(ValueError, match="must be set"):
        SharePhase.from_proto(pb.SHARE_PHASE_UNSPECIFIED)
    with pytest.raises(ValueError, match="unknown 99"):
        SharePhase.from_proto(99)  # a value of a newer protocol
    with pytest.raises(ValueError, match="agents do not report it"):
        SharePhase.ASSIGNED.to_proto()


def test_a_status_keeps_its_warning_apart_from_its_message() -> None:
    status = ShareStatus(
        placement_id="p", job_uid="u", phase=SharePhase.ACCEPTED, warning="no MCS API"
    )
    message = status.to_proto()
    assert (message.phase, message.message, message.warning) == (
        pb.SHARE_PHASE_ACCEPTED,
        "",
        "no MCS API",
    )


def test_a_status_names_its_phase_for_a_global_of_before_share_phase() -> None:
    """A Global of the previous release reads the phase by name from field 3."""
    status = ShareStatus(placement_id="p", job_uid="u", phase=SharePhase.SUCCEEDED)
    assert status.to_proto().phase_name == "Succeeded"


def test_restarting_reaches_an_older_global_as_failed() -> None:
    restarting = ShareStatus(
        placement_id="p", job_uid="u", phase=SharePhase.RESTARTING, message="retry 1"
    ).to_proto()
    this = phases_accepted(pb.Welcome(share_phases=ACCEPTED_PHASES))
    assert report_for(restarting, this) is restarting  # a Global that lists it gets it
    older = phases_accepted(pb.Welcome())  # no share_phases: the release before Restarting
    sent = report_for(restarting, older)
    assert (sent.phase, sent.phase_name) == (pb.SHARE_PHASE_FAILED, "Failed")
    assert sent.message == "restarted in its cluster: retry 1"
    assert restarting.phase == pb.SHARE_PHASE_RESTARTING  # the kept report is not changed
    running = ShareStatus(placement_id="p", job_uid="u", phase=SharePhase.RUNNING).to_proto()
    assert report_for(running, older) is running


def test_a_staging_copy_takes_its_bytes_over_the_reserved_bandwidth() -> None:
    corpus, tokenizer = STAGED.staging
    assert corpus.seconds == pytest.approx(40 * 2**40 * 8 / 100e9)  # ~58.6 min
    assert tokenizer.seconds == 0.0  # no bandwidth reserved: not modelled
    assert STAGED.staging_bytes == 40 * 2**40 + 2**30


def test_staging_is_reported_between_assigned_and_accepted() -> None:
    assert SharePhase.ASSIGNED.progress < SharePhase.STAGING.progress
    assert SharePhase.STAGING.progress < SharePhase.ACCEPTED.progress
    status = ShareStatus(
        placement_id="p",
        job_uid="u",
        phase=SharePhase.STAGING,
        staged_bytes=10,
        staging_bytes=40,
    ).to_proto()
    assert (status.phase, status.staged_bytes, status.staging_bytes) == (
        pb.SHARE_PHASE_STAGING,
        10,
        40,
    )
