"""The generated gRPC code matches proto/ (regenerate with scripts/gen-proto.sh)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def test_generated_code_is_current(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            "-I",
            str(REPO / "proto"),
            f"--python_out={tmp_path}",
            f"--pyi_out={tmp_path}",
            f"--grpc_python_out={tmp_path}",
            str(REPO / "proto/volcano_global/rpc/v1/agent.proto"),
        ],
        check=True,
    )
    for name in ("agent_pb2.py", "agent_pb2.pyi", "agent_pb2_grpc.py"):
        fresh = (tmp_path / "volcano_global/rpc/v1" / name).read_text()
        committed = (REPO / "global/rpc/v1" / name).read_text()
        assert fresh == committed, f"global/rpc/v1/{name} is stale: run scripts/gen-proto.sh"
