"""`vglobal queues apply/get/close/open` and `vglobal priorityclasses` against a real server."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.server_process import ServerProcess

QUEUES = """\
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata:
  name: eng
spec:
  weight: 2
  capability:
    nvidia.com/gpu: 128
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata:
  name: prod
spec:
  weight: 3
  parent: eng
  reclaimable: false
"""
CLASS = """\
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: urgent
value: 5000
preemptionPolicy: Never
"""


def test_queue_and_priority_class_commands(server: ServerProcess, tmp_path: Path) -> None:
    path = tmp_path / "queues.yaml"
    path.write_text(QUEUES)
    applied = server.cli("-o", "json", "queues", "apply", "-f", str(path))
    assert applied.returncode == 0, applied.stderr
    assert [q["name"] for q in json.loads(applied.stdout)["items"]] == ["eng", "prod"]
    shown = yaml.safe_load(server.cli("queues", "get", "prod").stdout)
    assert shown["spec"] == {"weight": 3, "parent": "eng", "reclaimable": False}
    assert server.cli("queues", "close", "prod").returncode == 0
    listed = server.cli("queues").stdout
    assert "Closed" in listed and "eng" in listed
    assert server.cli("queues", "open", "prod").returncode == 0

    classes = tmp_path / "class.yaml"
    classes.write_text(CLASS)
    assert server.cli("priorityclasses", "apply", "-f", str(classes)).returncode == 0
    table = server.cli("priorityclasses").stdout
    assert "urgent" in table and "system-cluster-critical" in table and "Never" in table
    wrong = server.cli("priorityclasses", "apply", "-f", str(path))
    assert (wrong.returncode, "expected kind PriorityClass" in wrong.stderr) == (1, True)
    assert server.cli("priorityclasses", "delete", "urgent").returncode == 0
