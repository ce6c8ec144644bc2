#!/usr/bin/env bash
# Regenerate the Python code of proto/ into global/ (installed as volcano_global). The output is
# committed; tests/global/rpc/test_generated_code.py fails when it is stale.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-global-gen}
python=${PYTHON:-.venv/bin/python}
rm -rf "$out" && mkdir -p "$out"
"$python" -m grpc_tools.protoc -I proto --python_out="$out" --pyi_out="$out" --grpc_python_out="$out" \
  proto/volcano_global/rpc/v1/agent.proto
if [ "${1:-}" = "" ]; then
  mkdir -p global/rpc/v1
  cp "$out"/volcano_global/rpc/v1/agent_pb2*.py* global/rpc/v1/
  rm -rf "$out"
fi
