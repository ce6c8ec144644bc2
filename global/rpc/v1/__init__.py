"""Generated from proto/volcano_global/rpc/v1/agent.proto by scripts/gen-proto.sh; do not edit."""
