"""The agent protocol: generated gRPC code in v1/ (see proto/ and scripts/gen-proto.sh) and the
wire's domain types in shares.py."""
