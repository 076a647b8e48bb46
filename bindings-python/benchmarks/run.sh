#!/usr/bin/env bash
# Builds the wheel (via ../scripts/test.sh's build step is not needed: maturin directly),
# installs it with the compared libraries into the benchmark's own venv, and runs the
# hit-path benchmark (HERDLESS_BENCH=bench_batch.py: the batch one). Usage: bindings-python/benchmarks/run.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
pkg="$(cd "$here/.." && pwd)"
root="$(cd "$pkg/.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target/python}"
venv="${HERDLESS_BENCH_VENV:-$CARGO_TARGET_DIR/bench-venv}"
python="${PYTHON:-python3}"

[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check maturin==1.16.0 -r "$here/requirements.txt"
wheels="$CARGO_TARGET_DIR/bench-wheels"
rm -f "$wheels"/herdless-*.whl
"$venv/bin/maturin" build --quiet --release --locked -m "$pkg/Cargo.toml" --out "$wheels" -i "$venv/bin/python"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps "$wheels"/herdless-*.whl
cd "$here"
exec "$venv/bin/python" "${HERDLESS_BENCH:-bench_hit.py}" "$@"
