"""A share that stages its data, through the real kubernetes-asyncio client against the API
emulator, whose job controller runs the staging Job: the Job is created with the configured
copier and the items as environment, watched, reported Staging (with the bytes the copier
says it copied), and only once it is Complete is the Volcano Job created; a Job that fails or
outlasts its deadline fails the share with the reason; a cancelled share's staging Job is
deleted and its Volcano Job never made."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from core_agent.kubernetes.source import KubernetesSource
from core_agent.kubernetes.staging import STAGED_BYTES_ANNOTATION, StagingConfig
from tests.core_agent.test_kubernetes_shares import member_cluster, volcano_jobs
from tests.factories import eventually, job_document, share_assignment
from tests.k8s_emulator.server import BATCH_JOBS, KubeEmulator
from volcano_global.rpc.shares import ShareCancellation, SharePhase, ShareStatus, StagingItem

CORPUS = StagingItem(
    data_source="corpus-v3",
    bytes=4 * 2**30,
    source_cluster="gpu-west",
    source_uri="s3://corpora/v3/*",
    destination="/data/corpus-v3/",
    gbps=100.0,
)
ASSIGNMENT = share_assignment(
    manifest_json=json.dumps(job_document("train", replicas=2)), staging=(CORPUS,)
)
CONFIG = StagingConfig(secret="s3-credentials", volume_claim="corpora", timeout_s=600)


@asynccontextmanager
async def agent(
    config: StagingConfig = CONFIG,
) -> AsyncIterator[tuple[KubeEmulator, KubernetesSource, list[ShareStatus]]]:
    """An emulated member cluster watched by a Kubernetes source that stages with `config`."""
    async with member_cluster() as (emulator, kube_api):
        source = KubernetesSource(kube_api, watch_timeout_s=5, staging=config)
        await source.start()
        try:
            yield emulator, source, []
        finally:
            await source.stop()


def staging_jobs(emulator: KubeEmulator) -> list[dict[str, Any]]:
    return list(emulator.objects[BATCH_JOBS].values())


def phases(reports: list[ShareStatus]) -> list[SharePhase]:
    return [r.phase for r in reports]


async def test_the_data_is_staged_by_a_job_before_the_volcano_job_is_created() -> None:
    async with agent() as (emulator, source, reports):
        emulator.jobs.run_s = 300.0  # until finish(), within the Job's deadline
        source.apply_share(ASSIGNMENT, reports.append)
        await eventually(lambda: bool(staging_jobs(emulator)) and bool(reports))
        [job] = staging_jobs(emulator)
        spec = job["spec"]["template"]["spec"]
        [copier] = spec["containers"]
        env = {e["name"]: e["value"] for e in copier["env"]}
        assert env["VGLOBAL_STAGING_SOURCE"] == "s3://corpora/v3/*"
        assert env["VGLOBAL_STAGING_DESTINATION"] == "/data/corpus-v3/"
        assert (env["VGLOBAL_STAGING_DATA_SOURCE"], env["VGLOBAL_STAGING_BYTES"]) == (
            "corpus-v3",
            str(4 * 2**30),
        )
        assert copier["image"] == CONFIG.image
        assert copier["args"] == [
            "cp",
            "$(VGLOBAL_STAGING_SOURCE)",
            "$(VGLOBAL_STAGING_DESTINATION)",
        ]
        assert copier["envFrom"] == [{"secretRef": {"name": "s3-credentials"}}]
        assert spec["volumes"][0]["persistentVolumeClaim"] == {"claimName": "corpora"}
        assert job["spec"]["activeDeadlineSeconds"] == 600
        assert volcano_jobs(emulator) == []  # not before the data is there
        assert (reports[0].phase, reports[0].staging_bytes) == (SharePhase.STAGING, 4 * 2**30)
        assert [h.phase for h in source.held_shares()] == [SharePhase.STAGING]

        # A copier that says how far it is: reported.
        meta = job["metadata"]
        annotations = {"metadata": {"annotations": {STAGED_BYTES_ANNOTATION: str(2**30)}}}
        emulator.patch(BATCH_JOBS, meta["name"], annotations, meta["namespace"])
        await eventually(lambda: any(r.staged_bytes == 2**30 for r in reports))

        emulator.jobs.finish()
        await eventually(lambda: len(volcano_jobs(emulator)) == 1)
        await eventually(lambda: reports[-1].phase is SharePhase.ACCEPTED)
        assert set(phases(reports)) == {SharePhase.STAGING, SharePhase.ACCEPTED}
        assert phases(reports).index(SharePhase.ACCEPTED) > phases(reports).index(
            SharePhase.STAGING
        )
        # Given again (a cut stream): the data is there, so no second copy.
        source.apply_share(ASSIGNMENT, reports.append)
        await eventually(lambda: phases(reports)[-2:] == [SharePhase.ACCEPTED] * 2)
        assert len(staging_jobs(emulator)) == 1


@pytest.mark.parametrize(
    ("fail_reason", "timeout_s", "expected"),
    [
        ("BackoffLimitExceeded", 600, "BackoffLimitExceeded: Job has reached the specified"),
        ("", 0.5, "DeadlineExceeded: Job was active longer than specified deadline"),
    ],
    ids=["copy-failed", "deadline"],
)
async def test_a_staging_that_fails_or_times_out_fails_the_share_with_the_reason(
    fail_reason: str, timeout_s: float, expected: str
) -> None:
    config = StagingConfig(timeout_s=timeout_s)
    async with agent(config) as (emulator, source, reports):
        emulator.jobs.run_s, emulator.jobs.fail_reason = 3.0, fail_reason
        source.apply_share(ASSIGNMENT, reports.append)
        await eventually(lambda: reports and reports[-1].phase is SharePhase.FAILED)
        message = reports[-1].message
        assert message.startswith("staging Job ml/train-stage-0123abcd")
        assert expected in message
        assert volcano_jobs(emulator) == []
        assert source.held_shares() == []  # not held: the Global requeues the job


async def test_the_agent_gives_up_a_copy_its_cluster_lets_outlast_the_deadline() -> None:
    config = StagingConfig(timeout_s=0.3, grace_s=0.2)
    async with agent(config) as (emulator, source, reports):
        emulator.jobs.run_s, emulator.jobs.deadlines = 3600.0, False
        source.apply_share(ASSIGNMENT, reports.append)
        await eventually(lambda: reports and reports[-1].phase is SharePhase.FAILED)
        assert reports[-1].message.endswith("did not finish within 0.3 s")
        assert staging_jobs(emulator) == []  # deleted: the copy stops
        assert volcano_jobs(emulator) == []


async def test_a_cancelled_share_has_its_staging_job_deleted() -> None:
    async with agent() as (emulator, source, reports):
        emulator.jobs.run_s = 3600.0  # still copying when the cancellation comes
        source.apply_share(ASSIGNMENT, reports.append)
        await eventually(lambda: bool(staging_jobs(emulator)) and bool(reports))
        cancellation = ShareCancellation(
            placement_id=ASSIGNMENT.placement_id, job_uid="u", reason="job cancelled"
        )
        source.cancel_share(cancellation, reports.append)
        await eventually(lambda: reports[-1].phase is SharePhase.CANCELLED)
        assert staging_jobs(emulator) == []
        assert volcano_jobs(emulator) == []
        assert source.held_shares() == []


def test_the_copier_is_read_from_the_agents_staging_config(tmp_path: Path) -> None:
    path = tmp_path / "staging.yaml"
    path.write_text(
        "image: rclone/rclone:1.68\n"
        'args: ["copy", "$(VGLOBAL_STAGING_SOURCE)", "$(VGLOBAL_STAGING_DESTINATION)"]\n'
        "secret: rclone-remotes\nvolume_claim: corpora\ntimeout_s: 7200\n"
    )
    config = StagingConfig.from_yaml(path)
    assert (config.image, config.args[0], config.secret, config.timeout_s) == (
        "rclone/rclone:1.68",
        "copy",
        "rclone-remotes",
        7200,
    )
    assert config.mount_path == "/data"  # the defaults stay
    path.write_text("image: x\nvolumeClaim: corpora\n")  # a misspelt key is refused, not dropped
    with pytest.raises(ValueError, match="unknown: volumeClaim"):
        StagingConfig.from_yaml(path)
