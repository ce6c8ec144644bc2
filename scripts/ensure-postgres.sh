#!/usr/bin/env bash
# Make sure the PostgreSQL the tests use is up (127.0.0.1:5432 unless VGLOBAL_TEST_POSTGRES_URL
# says otherwise). Starts the local Debian cluster if it is down; fails loudly if it cannot.
set -euo pipefail

host=127.0.0.1 port=5432
if pg_isready -q -h "$host" -p "$port" 2>/dev/null; then
  exit 0
fi
if [ -n "${VGLOBAL_TEST_POSTGRES_URL:-}" ]; then
  echo "ensure-postgres: using VGLOBAL_TEST_POSTGRES_URL; not starting a local server" >&2
  exit 0
fi
if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
  version=$(ls /etc/postgresql | sort -V | tail -n 1)
  echo "ensure-postgres: starting PostgreSQL $version" >&2
  pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
fi
for _ in $(seq 1 30); do
  pg_isready -q -h "$host" -p "$port" 2>/dev/null && exit 0
  sleep 1
done
echo "ensure-postgres: PostgreSQL is not reachable on $host:$port; the Postgres tests need it" >&2
exit 1
