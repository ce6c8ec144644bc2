"""The SDK is a light install (issue 37 item 13): importing it and using `Runtime` in a
training container loads none of the server's dependencies, and the separate distribution
(`packaging/sdk/pyproject.toml`, built from the same tree) ships every module the SDK imports
and declares every library it needs. `vglobal plan` writes the communication annotation as a
`|` block, as the examples do."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml
from typer.testing import CliRunner

from volcano_global.cli.main import app

REPO = Path(__file__).resolve().parents[3]
HEAVY = {"fastapi", "ortools", "grpc", "matplotlib", "kubernetes_asyncio", "sqlalchemy", "uvicorn"}
# import name -> the distribution that provides it (pydantic brings its own helpers)
PROVIDED_BY = {
    "pydantic": "pydantic",
    "pydantic_core": "pydantic",
    "annotated_types": "pydantic",
    "typing_extensions": "pydantic",
    "typing_inspection": "pydantic",
    "yaml": "pyyaml",
    "orjson": "orjson",
}
USE = """
import json, sys
before = set(sys.modules)
from volcano_global.sdk import ParallelPlan, Runtime, job_document
env = {"VGLOBAL_JOB_UID": "u", "VGLOBAL_PLACEMENT_ID": "p", "VGLOBAL_WORLD_PODS": "2",
       "VGLOBAL_SHARE_PODS": "2", "VGLOBAL_RANK_OFFSET": "0", "VGLOBAL_CLUSTER_INDEX": "0",
       "VGLOBAL_CLUSTER_COUNT": "1", "VGLOBAL_RENDEZVOUS_ADDR": "rdzv:29500",
       "VC_TASK_INDEX": "1", "LOCAL_RANK": "0"}
runtime = Runtime.from_env(env, tensor_parallel=8, procs_per_pod=8)
assert runtime.layout.world_size == 16, runtime.layout
plan = ParallelPlan(tensor_parallel=8, data_parallel=2, gpus_per_pod=8)
job_document(plan, name="t", image="trainer:1")
loaded = set(sys.modules) - before
json.dump({m: getattr(sys.modules[m], "__package__", None) for m in loaded}, sys.stdout)
"""


def loaded_by_the_sdk() -> dict[str, str | None]:
    """Every module the SDK's use loads -> its package."""
    result = subprocess.run(
        [sys.executable, "-c", USE], capture_output=True, text=True, timeout=60, cwd=REPO
    )
    assert result.returncode == 0, result.stderr
    return dict(json.loads(result.stdout))


def test_the_sdk_imports_none_of_the_servers_dependencies() -> None:
    loaded = loaded_by_the_sdk()
    assert {m.split(".")[0] for m in loaded} & HEAVY == set()


def test_the_sdk_distribution_ships_what_the_sdk_imports() -> None:
    config = tomllib.loads((REPO / "packaging" / "sdk" / "pyproject.toml").read_text())
    packages = set(config["tool"]["setuptools"]["packages"])
    declared = {d.split(">")[0].split("=")[0] for d in config["project"]["dependencies"]}
    loaded = loaded_by_the_sdk()
    ours = {package for m, package in loaded.items() if m.startswith("volcano_global")}
    assert ours - packages == set()
    stdlib = set(sys.stdlib_module_names) | {"volcano_global", "cython_runtime"}  # Cython's
    third_party = {m.split(".")[0] for m in loaded} - stdlib
    third_party = {m for m in third_party if not m.startswith("_")}
    assert {PROVIDED_BY.get(m, m) for m in third_party} <= declared


def test_plan_writes_the_communication_annotation_as_a_block(tmp_path: Path) -> None:
    out = tmp_path / "job.yaml"
    args = ["plan", "llama", "--tp", "8", "--pp", "2", "--dp", "2", "--params", "7e9"]
    result = CliRunner().invoke(app, [*args, "--step-time", "10", "--out", str(out)])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert "global.volcano.sh/communication: |\n      tensorParallel: 8\n" in text
    assert "\n\n" not in text and "\\n" not in text
    annotation = yaml.safe_load(text)["metadata"]["annotations"]["global.volcano.sh/communication"]
    assert yaml.safe_load(annotation)["tensorParallel"] == 8
