#!/usr/bin/env bash
# The deploy/ tests render the Kustomize overlays with `kubectl kustomize`. Install kubectl
# from Debian when it is missing (its kustomize is older but reads these overlays).
set -euo pipefail
if command -v kubectl >/dev/null 2>&1; then
  exit 0
fi
echo "ensure-kubectl: installing kubernetes-client from Debian" >&2
if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq kubernetes-client; else sudo apt-get update -qq && sudo apt-get install -y -qq kubernetes-client; fi
command -v kubectl >/dev/null
