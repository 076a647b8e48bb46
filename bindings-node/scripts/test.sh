#!/usr/bin/env bash
# Builds the Node binding and runs all of its checks, from a fresh machine:
#   npm ci (the pinned dev tools of package-lock.json: the napi CLI, TypeScript, the
#   frameworks of the integrations), the addon as it ships (scripts/package addon: release,
#   linked by zig for glibc 2.17; index.d.ts regenerated from the Rust doc comments and
#   checked to be the committed one), cargo fmt and clippy on the binding crate,
#   tsc --noEmit on the typing tests, node --test (the Redis tests start a private
#   redis-server; the cross-language one also runs the Rust fleet worker, built here, and the
#   Python binding's venv when it exists; @keyv/test-suite runs under vitest from there),
#   examples/nestjs (npm ci from its own lockfile; two processes of the app on one Redis), and
#   the install from the source folder
#   (scripts/install-test.sh; the packed tarballs are installed by test-all's package
#   section).
# Idempotent; re-runs skip npm ci while package-lock.json is unchanged and reuse cargo's
# build cache (CARGO_TARGET_DIR, default <repo>/target/node).
# HERDLESS_NODE_SKIP_INSTALL_TEST=1 skips the install from the source folder (it rebuilds from a
# clean export).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
root="$(cd "$here/.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target/node}"
cd "$here"

step() { printf '\n== node binding: %s\n' "$*"; }

step "cargo fmt --check"
cargo fmt --manifest-path Cargo.toml -- --check
step "cargo clippy -D warnings"
cargo clippy --quiet --manifest-path Cargo.toml --all-targets --locked -- -D warnings

# The very addon scripts/package ships (in its platform package), built once per test-all run.
step "building the addon (scripts/package addon: napi build --release, zig, glibc 2.17)"
mkdir -p "$CARGO_TARGET_DIR"
cp index.d.ts "$CARGO_TARGET_DIR/index.d.ts.committed"
HERDLESS_NODE_TARGET="$CARGO_TARGET_DIR" "$root/scripts/package" addon
if ! diff -u "$CARGO_TARGET_DIR/index.d.ts.committed" index.d.ts; then
  echo "index.d.ts changed when regenerated from the Rust doc comments: commit the new one" >&2
  exit 1
fi

step "tsc --noEmit (typing tests against index.d.ts)"
npx --no-install tsc --noEmit -p test/types

# The memcached tier's tests (test/memcached.test.js) start private memcached servers.
"$root/scripts/memcached" || true

step "the other languages of the Redis fleet test"
# The Rust fleet worker of herdless-redis (built here, in this target dir).
if cargo build --quiet --release --locked --manifest-path "$root/Cargo.toml" -p herdless-redis --bin fleet_worker; then
  export HERDLESS_FLEET_WORKER="$CARGO_TARGET_DIR/release/fleet_worker"
  echo "Rust: $HERDLESS_FLEET_WORKER"
else
  echo "Rust: the fleet_worker binary did not build: the cross-language test will be skipped"
fi
# A Python with the herdless wheel, as bindings-python/scripts/test.sh leaves it (test-all
# runs the Python section first).
py="${HERDLESS_PY_VENV:-$root/target/python/venv}/bin/python"
if [ -x "$py" ] && "$py" -c "import herdless; herdless.Cache(redis='redis://127.0.0.1:1')" 2>/dev/null; then
  export HERDLESS_PYTHON="$py"
  echo "Python: $HERDLESS_PYTHON"
else
  echo "Python: no venv with a Redis-capable herdless wheel at $py (run bindings-python/scripts/test.sh first): the cross-language test will be skipped"
fi

step "node --test (with @keyv/test-suite under vitest: test/keyv_suite.test.js)"
node --test test/

# The NestJS example: its own pinned dependencies (npm ci from its lockfile, re-run only when
# the lockfile changes) and this folder as its herdless.
step "examples/nestjs: two app processes on one Redis over real HTTP"
ex="$root/examples/nestjs"
ex_stamp="$ex/node_modules/.herdless-lock.sha256"
ex_want="$(sha256sum "$ex/package-lock.json" | cut -d' ' -f1)"
if [ "$(cat "$ex_stamp" 2>/dev/null || true)" != "$ex_want" ]; then
  (cd "$ex" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
  echo "$ex_want" >"$ex_stamp"
fi
ln -sfn "$here" "$ex/node_modules/herdless"
(cd "$ex" && node --test app.test.mjs)

if [ "${HERDLESS_NODE_SKIP_INSTALL_TEST:-}" = 1 ]; then
  step "install from the source folder: SKIPPED (HERDLESS_NODE_SKIP_INSTALL_TEST=1)"
else
  step "install from the source folder (a fresh project)"
  bash scripts/install-test.sh
fi
