#!/usr/bin/env bash
# Builds the Python binding and runs all of its checks, from a fresh machine:
#   a venv with the pinned tools (requirements-dev.txt), the abi3 manylinux wheel as it
#   ships (scripts/package wheel, into dist/) installed into it, cargo fmt and clippy,
#   mypy --strict on the package, mypy.stubtest on the hand-written stubs, pytest (extra arguments are passed to pytest;
#   dogpile.cache's and cachelib's own backend tests included), and the Flask example. The Redis tests
#   start private redis-server instances (skipped, loudly, when redis-server is missing;
#   failed under CI=true), and the cross-language one runs the Rust `fleet_worker`.
# Idempotent; re-runs reuse the venv (reinstalled only when requirements-dev.txt changes) and
# cargo's build cache (CARGO_TARGET_DIR, default <repo>/target/python).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
root="$(cd "$here/.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target/python}"
step() { printf '\n== python binding: %s\n' "$*"; }

# shellcheck source=venv.sh
. "$here/scripts/venv.sh"

step "cargo fmt --check"
cargo fmt --manifest-path "$here/Cargo.toml" -- --check
step "cargo clippy -D warnings"
cargo clippy --quiet --manifest-path "$here/Cargo.toml" --all-targets --locked -- -D warnings

# The very wheel scripts/package ships (dist/), built once per test-all run.
step "building the wheel (scripts/package wheel: maturin --release --zig, manylinux2014)"
HERDLESS_PY_TARGET="$CARGO_TARGET_DIR" "$root/scripts/package" wheel
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --force-reinstall \
  --no-deps "$root"/dist/herdless-*manylinux_2_17_x86_64.whl # this machine's, of all the platforms'

# The memcached tier's tests (tests/test_memcached.py) start private memcached servers.
"$root/scripts/memcached" || true

# The Rust process of the cross-language Redis test (tests/test_redis.py).
step "building the Rust fleet worker (cross-language test)"
cargo build --quiet --release --locked --manifest-path "$root/Cargo.toml" -p herdless-redis \
  --bin fleet_worker
export HERDLESS_FLEET_WORKER="$CARGO_TARGET_DIR/release/fleet_worker"

# Django's own cache tests (tests/test_django_suite.py): the wheel ships none, the sdist of
# the pinned release has tests/cache/. Fetched once into the target dir, pinned by hash.
step "Django's own cache tests (the Django sdist, pinned by hash)"
django_version="$(sed -n 's/^Django==//p' "$here/requirements-dev.txt")"
django_dir="$CARGO_TARGET_DIR/django-$django_version"
if [ ! -f "$django_dir/tests/cache/tests.py" ]; then
  rm -rf "$django_dir" && mkdir -p "$django_dir"
  "$venv/bin/python" -m pip download --quiet --disable-pip-version-check --no-deps \
    --no-binary :all: --require-hashes -r "$here/tests/django-sdist.txt" -d "$django_dir"
  tar -xzf "$django_dir/django-$django_version.tar.gz" -C "$django_dir" --strip-components=1 \
    "django-$django_version/tests/cache"
fi
export HERDLESS_DJANGO_TESTS="$django_dir/tests"

# cachelib's own backend tests (tests/test_cachelib_suite.py): its wheel ships none, the sdist
# of the pinned release has tests/. Fetched once into the target dir, pinned by hash.
step "cachelib's own backend tests (the cachelib sdist, pinned by hash)"
cachelib_version="$(sed -n 's/^cachelib==//p' "$here/requirements-dev.txt")"
cachelib_dir="$CARGO_TARGET_DIR/cachelib-$cachelib_version"
if [ ! -f "$cachelib_dir/tests/common.py" ]; then
  rm -rf "$cachelib_dir" && mkdir -p "$cachelib_dir"
  "$venv/bin/python" -m pip download --quiet --disable-pip-version-check --no-deps \
    --no-binary :all: --require-hashes -r "$here/tests/cachelib-sdist.txt" -d "$cachelib_dir"
  tar -xzf "$cachelib_dir/cachelib-$cachelib_version.tar.gz" -C "$cachelib_dir" \
    --strip-components=1 "cachelib-$cachelib_version/tests"
fi
export HERDLESS_CACHELIB_TESTS="$cachelib_dir/tests"

# Run from the tests' directory so that `import herdless` is the installed wheel, never the
# source tree.
cd "$here/tests"
step "mypy --strict"
"$venv/bin/python" -m mypy --strict --no-incremental -p herdless
"$venv/bin/python" -m mypy --strict --no-incremental --python-version 3.11 .
step "stubtest"
"$venv/bin/python" -m mypy.stubtest herdless
step "pytest"
"$venv/bin/python" -m pytest -c "$here/pyproject.toml" --rootdir "$here" "$@"
# The Flask example (examples/flask: two worker processes over real HTTP sharing a private
# Redis), with the wheel installed here; scripts/test-package runs it again from dist/.
step "examples/flask (two workers over real HTTP)"
(cd "$root/examples" && "$venv/bin/python" -m pytest -q -p no:cacheprovider -W error flask)
