"""The real kubectl against a real `vglobal server` process over https (kubectl sends a
bearer token only over TLS), one server for the module: discovery, apply (created, unchanged,
configured), get as a table and as YAML, get -w seeing a phase change, delete, explain, and
an invalid document refused naming the field."""

from __future__ import annotations

import queue
import shutil
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from tests.certificates import issue, write
from tests.conftest import ADMIN_TOKEN
from tests.factories import REPLY_S, example, job_document, priority_class, volcano_queue
from tests.server_process import VGLOBAL, ServerProcess

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl not installed")


class Kubectl:
    def __init__(self, server: ServerProcess, tmp: Path, ca: Path) -> None:
        self.server = server
        self.tmp = tmp
        # The kubeconfig as `vglobal kubeconfig` prints it for this server and token.
        printed = subprocess.run(
            [*VGLOBAL, "--server", server.url, "--token", ADMIN_TOKEN, "kubeconfig", "-n", "ml"],
            env={**server.env, "VGLOBAL_CA_FILE": str(ca)},
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
        self.kubeconfig = tmp / "kubeconfig"
        self.kubeconfig.write_text(printed)
        self.api = httpx.Client(
            timeout=REPLY_S,
            base_url=server.url,
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
            verify=ssl.create_default_context(cafile=str(ca)),
        )

    def command(self, *args: str) -> list[str]:
        assert KUBECTL is not None
        return [
            KUBECTL,
            f"--kubeconfig={self.kubeconfig}",
            f"--cache-dir={self.tmp / 'cache'}",
            *args,
        ]

    def __call__(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.command(*args), input=stdin, capture_output=True, text=True, timeout=60
        )

    def apply(self, document: dict[str, object]) -> subprocess.CompletedProcess[str]:
        return self("apply", "-f", "-", stdin=yaml.safe_dump(document))


@pytest.fixture(scope="module")
def kubectl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kubectl]:
    tmp = tmp_path_factory.mktemp("kubectl")
    cert, key = write(tmp / "server", *issue("global", None, ca=True, ip="127.0.0.1"))
    server = ServerProcess(f"sqlite+aiosqlite:///{tmp}/server.db", tmp)
    server.url = server.url.replace("http://", "https://")
    server.env |= {
        "VGLOBAL_TLS__CERT_FILE": str(cert),
        "VGLOBAL_TLS__KEY_FILE": str(key),
        "VGLOBAL_KUBE__WATCH_POLL_S": "0.1",
    }
    server.ready_verify = False
    server.start()
    try:
        yield Kubectl(server, tmp, cert)
    finally:
        server.stop()


def _labelled(name: str, **labels: str) -> dict[str, object]:
    document = job_document(name)
    document["metadata"]["labels"] = labels  # type: ignore[index]
    return document


def test_api_resources_lists_volcano_kinds_with_short_names(kubectl: Kubectl) -> None:
    listed = kubectl("api-resources")
    assert listed.returncode == 0, listed.stderr
    rows = {line.split()[0]: line.split() for line in listed.stdout.splitlines()[1:]}
    assert rows["jobs"][1:] == ["vcjob,vj", "batch.volcano.sh/v1alpha1", "true", "Job"]
    assert rows["hyperjobs"][1:] == [
        "hyperjob,hj",
        "training.volcano.sh/v1alpha1",
        "true",
        "HyperJob",
    ]


def test_apply_creates_then_unchanged_then_configured_one_store(kubectl: Kubectl) -> None:
    document = _labelled("apply-me", team="llm")
    first = kubectl.apply(document)
    assert first.stdout.strip() == "job.batch.volcano.sh/apply-me created", first.stderr
    assert kubectl.apply(document).stdout.strip() == "job.batch.volcano.sh/apply-me unchanged"
    edited = _labelled("apply-me", team="vision")
    assert kubectl.apply(edited).stdout.strip() == "job.batch.volcano.sh/apply-me configured"
    assert kubectl.apply(edited).stdout.strip() == "job.batch.volcano.sh/apply-me unchanged"
    # kubectl diff: a server-side dry run of the patch, nothing written.
    assert kubectl("diff", "-f", "-", stdin=yaml.safe_dump(edited)).returncode == 0
    differs = kubectl("diff", "-f", "-", stdin=yaml.safe_dump(document))
    assert differs.returncode == 1, differs.stderr
    assert "-    team: vision" in differs.stdout and "+    team: llm" in differs.stdout

    shown = yaml.safe_load(kubectl("get", "vcjob", "apply-me", "-o", "yaml").stdout)
    assert shown["metadata"]["labels"] == {"team": "vision"}
    # The same job the REST API shows, stored once.
    jobs = kubectl.api.get("/api/v1/jobs", params={"name": "apply-me"}).json()["items"]
    assert [j["uid"] for j in jobs] == [shown["metadata"]["uid"]]


def test_get_prints_volcano_columns_and_yaml_with_status(kubectl: Kubectl) -> None:
    assert kubectl.apply(job_document("table-me", replicas=3)).returncode == 0
    table = kubectl("get", "vcjob", "table-me")
    header, row = table.stdout.splitlines()
    assert header.split() == [
        "NAME",
        "STATUS",
        "MINAVAILABLE",
        "RUNNINGS",
        "AGE",
        "CLUSTERS",
        "DURATION",
    ]
    assert row.split()[:4] == ["table-me", "Pending", "3", "0"]
    assert row.split()[5:] == ["<none>", "<none>"]
    wide = kubectl("get", "vj", "table-me", "-o", "wide").stdout.splitlines()
    assert "QUEUE" in wide[0].split() and "default" in wide[1].split()

    shown = yaml.safe_load(kubectl("get", "vcjob", "table-me", "-o", "yaml").stdout)
    assert shown["status"]["state"]["phase"] == "Pending"
    assert shown["status"]["globalState"] == "Pending"
    assert shown["status"]["minAvailable"] == 3
    assert shown["spec"]["tasks"][0]["replicas"] == 3
    assert shown["metadata"]["namespace"] == "ml"
    assert int(shown["metadata"]["resourceVersion"]) > 0


def _lines(process: subprocess.Popen[str]) -> queue.Queue[str]:
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def _until(lines: queue.Queue[str], word: str) -> list[str]:
    seen = []
    while True:
        line = lines.get(timeout=20)  # queue.Empty fails the test
        seen.append(line)
        if word in line.split():
            return seen


def test_get_watch_sees_the_phase_change_and_delete_removes(kubectl: Kubectl) -> None:
    assert kubectl.apply(_labelled("watch-me", test="watch")).returncode == 0
    uid = yaml.safe_load(kubectl("get", "vcjob", "watch-me", "-o", "yaml").stdout)["metadata"][
        "uid"
    ]
    # A list watch: it starts from the list's resourceVersion, so a change made before the
    # watch connects still reaches it. (`get NAME -w` starts from "now" and hides the first
    # event, as kubectl does against any API server.)
    watch = subprocess.Popen(
        kubectl.command("get", "vcjob", "-l", "test=watch", "-w"), stdout=subprocess.PIPE, text=True
    )
    try:
        lines = _lines(watch)
        assert _until(lines, "Pending")[0].split()[0] == "NAME"
        assert kubectl.api.post(f"/api/v1/jobs/{uid}/cancel").status_code == 200
        assert _until(lines, "Aborted")[-1].split()[:2] == ["watch-me", "Aborted"]
    finally:
        watch.terminate()
        watch.wait(timeout=10)

    deleted = kubectl("delete", "vcjob", "watch-me")
    assert deleted.stdout.strip() == 'job.batch.volcano.sh "watch-me" deleted', deleted.stderr
    gone = kubectl("get", "vcjob", "watch-me")
    assert 'jobs.batch.volcano.sh "watch-me" not found' in gone.stderr
    # Kept in the Global's history.
    assert kubectl.api.get(f"/api/v1/jobs/{uid}").json()["state"] == "Cancelled"
    # The name is free again.
    assert "created" in kubectl.apply(job_document("watch-me")).stdout


def test_describe_shows_the_jobs_events(kubectl: Kubectl) -> None:
    assert kubectl.apply(job_document("describe-me")).returncode == 0
    uid = yaml.safe_load(kubectl("get", "vcjob", "describe-me", "-o", "yaml").stdout)["metadata"][
        "uid"
    ]
    assert kubectl.api.post(f"/api/v1/jobs/{uid}/cancel").status_code == 200
    described = kubectl("describe", "vcjob", "describe-me")
    assert described.returncode == 0, described.stderr
    events = described.stdout.split("\nEvents:", 1)[1].splitlines()
    assert events[1].split() == ["Type", "Reason", "Age", "From", "Message"]
    rows = [line.split() for line in events[3:] if line.strip()]
    assert [r[1] for r in rows] == ["Submitted", "Cancelled"]  # oldest first, as kubectl sorts
    assert rows[1][:2] == ["Normal", "Cancelled"] and "volcano-global" in rows[1]
    # The same log through `kubectl get events`, selected as kubectl describe selects it.
    listed = kubectl(
        "get", "events", "--field-selector", "involvedObject.name=describe-me", "-o", "name"
    )
    assert listed.returncode == 0, listed.stderr
    assert len(listed.stdout.split()) == 2


def test_delete_of_a_running_job_cancels_it(kubectl: Kubectl) -> None:
    assert kubectl.apply(job_document("delete-me")).returncode == 0
    deleted = kubectl("delete", "vj", "delete-me")
    assert deleted.returncode == 0, deleted.stderr
    jobs = kubectl.api.get("/api/v1/jobs", params={"name": "delete-me"}).json()["items"]
    assert [j["state"] for j in jobs] == ["Cancelled"]


def test_explain_reads_the_openapi_schema(kubectl: Kubectl) -> None:
    spec = kubectl("explain", "vcjob.spec")
    assert spec.returncode == 0, spec.stderr
    assert "KIND:       Job" in spec.stdout
    for field in ("minAvailable", "tasks", "queue", "policies"):
        assert f"  {field}\t" in spec.stdout
    clusters = kubectl("explain", "vcjob.status.clusters").stdout
    assert "The member clusters the job runs in, or ran in once finished" in clusters


def test_invalid_documents_are_refused_naming_the_field(kubectl: Kubectl) -> None:
    too_few = job_document("bad-gang", replicas=2, minAvailable=5)
    refused = kubectl.apply(too_few)
    assert refused.returncode != 0
    assert refused.stderr.startswith('The Job "bad-gang" is invalid: spec.minAvailable: ')

    unknown = job_document("bad-field")
    unknown["spec"]["tasks"][0]["bogus"] = 1  # type: ignore[index]
    refused = kubectl.apply(unknown)
    assert "spec.tasks[0].bogus" in refused.stderr
    assert "bad-field" not in kubectl("get", "vcjob").stdout


def test_hyperjob_apply_and_get(kubectl: Kubectl) -> None:
    document = yaml.safe_load(example("hyperjob-llm-training.yaml"))
    document["metadata"]["namespace"] = "ml"
    queue = document["spec"]["replicatedJobs"][0]["templateSpec"]["queue"]
    assert kubectl.api.post("/api/v1/queues", json={"name": queue}).status_code == 201
    applied = kubectl.apply(document)
    name = document["metadata"]["name"]
    assert applied.stdout.strip() == f"hyperjob.training.volcano.sh/{name} created", applied.stderr
    table = kubectl("get", "hj").stdout.splitlines()
    assert table[0].split() == ["NAME", "STATUS", "AGE", "CLUSTERS", "DURATION"]
    assert table[1].split()[:2] == [name, "Pending"]


def _three_documents(description: str = "may wait") -> str:
    """A Queue, a PriorityClass and a Job using both, as a Volcano user's file holds them."""
    queue = volcano_queue("kq", weight=3, capability={"nvidia.com/gpu": 64}, reclaimable=False)
    pc = priority_class("kpc", 1000, preemptionPolicy="Never", description=description)
    job = job_document("kjob")
    job["spec"]["queue"] = "kq"  # type: ignore[index]
    job["spec"]["priorityClassName"] = "kpc"  # type: ignore[index]
    return yaml.safe_dump_all([queue, pc, job])


def test_queues_and_classes_through_kubectl(kubectl: Kubectl) -> None:
    rows = {line.split()[0]: line.split() for line in kubectl("api-resources").stdout.splitlines()}
    assert rows["queues"][1:] == [
        "q,queue-v1beta1",
        "scheduling.volcano.sh/v1beta1",
        "false",
        "Queue",
    ]
    assert rows["priorityclasses"][1:] == ["pc", "scheduling.k8s.io/v1", "false", "PriorityClass"]

    applied = kubectl("apply", "-f", "-", stdin=_three_documents())
    assert applied.stdout.splitlines() == [
        "queue.scheduling.volcano.sh/kq created",
        "priorityclass.scheduling.k8s.io/kpc created",
        "job.batch.volcano.sh/kjob created",
    ], applied.stderr
    again = kubectl("apply", "-f", "-", stdin=_three_documents())
    assert [line.split()[-1] for line in again.stdout.splitlines()] == ["unchanged"] * 3, (
        again.stderr
    )
    same = kubectl("diff", "-f", "-", stdin=_three_documents())
    assert same.returncode == 0, same.stdout + same.stderr
    differs = kubectl("diff", "-f", "-", stdin=_three_documents("urgent"))
    assert differs.returncode == 1 and "+description: urgent" in differs.stdout, differs.stderr
    edited = kubectl("apply", "-f", "-", stdin=_three_documents("urgent"))
    assert edited.stdout.splitlines()[1] == "priorityclass.scheduling.k8s.io/kpc configured", (
        edited.stderr
    )
    # The REST API sees the same objects.
    assert kubectl.api.get("/api/v1/priorityclasses/kpc").json()["description"] == "urgent"
    job = kubectl.api.get("/api/v1/jobs", params={"name": "kjob"}).json()["items"][0]
    assert job["queue"] == "kq"

    header, row = kubectl("get", "q", "kq").stdout.splitlines()
    assert header.split() == ["NAME", "PARENT", "STATE", "WEIGHT", "PENDING", "RUNNING", "AGE"]
    assert row.split()[:5] == ["kq", "root", "Open", "3", "1"]
    header, row = kubectl("get", "pc", "kpc").stdout.splitlines()
    assert header.split() == ["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"]
    assert row.split()[:3] == ["kpc", "1000", "false"] and row.split()[-1] == "Never"
    assert "system-cluster-critical" in kubectl("get", "priorityclasses").stdout

    explained = kubectl("explain", "queue.spec")
    assert explained.returncode == 0, explained.stderr
    for field in ("capability", "deserved", "guarantee", "reclaimable", "parent"):
        assert f"  {field}\t" in explained.stdout

    watch = subprocess.Popen(
        kubectl.command("get", "queue", "-w"), stdout=subprocess.PIPE, text=True
    )
    try:
        lines = _lines(watch)
        _until(lines, "kq")
        closed = kubectl(
            "patch",
            "queue",
            "kq",
            "--type",
            "merge",
            "--subresource",
            "status",
            "-p",
            '{"status": {"state": "Closed"}}',
        )
        assert closed.returncode == 0, closed.stderr
        assert _until(lines, "Closed")[-1].split()[:3] == ["kq", "root", "Closed"]
    finally:
        watch.terminate()
        watch.wait(timeout=10)
    late = job_document("late")
    late["spec"]["queue"] = "kq"  # type: ignore[index]
    refused = kubectl.apply(late)
    assert refused.returncode != 0 and "Closed" in refused.stderr

    busy = kubectl("delete", "queue", "kq")
    assert busy.returncode != 0 and "unfinished jobs" in busy.stderr
    system = kubectl("delete", "pc", "system-node-critical")
    assert system.returncode != 0 and "built-in" in system.stderr
    assert kubectl("delete", "vcjob", "kjob").returncode == 0
    assert kubectl("delete", "pc", "kpc").stdout.strip() == (
        'priorityclass.scheduling.k8s.io "kpc" deleted'
    )
