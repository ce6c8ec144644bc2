"""Generated gRPC code (see proto/ and scripts/gen-proto.sh)."""
