#!/usr/bin/env bash
# Runs the herdless-redis tests against private redis-server instances (and a local
# three-node Redis Cluster) that the tests start and stop themselves.
# Needs redis-server and redis-cli on PATH; installs them with apt-get when missing and
# running as root. Under CI=true, a missing Redis fails the run; elsewhere it is skipped
# loudly.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
root="$(cd "$here/.." && pwd)"

if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "herdless-redis: installing redis-server (apt-get)"
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
  fi
fi
if ! command -v redis-server >/dev/null 2>&1; then
  if [ "${CI:-}" = "true" ]; then
    echo "herdless-redis: redis-server is not available and CI=true: failing" >&2
    exit 1
  fi
  echo "herdless-redis: SKIPPED: redis-server not found; the Redis tests did not run" >&2
  exit 0
fi

# The memcached tier's tests start private memcached servers too.
"$root/scripts/memcached" || true

# Which server the tests run against (Redis, or Valkey through scripts/valkey's shim).
echo "herdless-redis: $(command -v redis-server): $(redis-server --version)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
cd "$root"
# Processes of the fleet tests, private servers and clusters are many: keep test binaries
# from running their servers all at once on a small machine.
cargo test -p herdless-redis --lib --bins --tests -- --test-threads=2
cargo test -p herdless-redis --doc
