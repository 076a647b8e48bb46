#!/usr/bin/env bash
# A fresh Node project installs herdless from the source folder, as a contributor does, and
# uses it from CommonJS and ESM: a clean export of the repository's HEAD (no addon, no
# node_modules), whose install script builds the addon with cargo alone. (The packed
# tarballs of dist/ are installed where there is no Rust by scripts/test-all's package
# section.) Skipped when HEAD's core/, redis/ and bindings-node/ are unchanged since its last
# success (it rebuilds the crates from a new path, in <repo>/target/node-install).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
root="$(cd "$here/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

smoke() { # <project dir>: uses the installed package from CJS and from ESM
  local dir=$1
  cat >"$dir/smoke.cjs" <<'JS'
const { Cache, ABSENT } = require('herdless')
const cache = new Cache({ ttl: 1000 })
let calls = 0
const load = async () => { calls++; await new Promise((r) => setTimeout(r, 20)); return { ok: true } }
Promise.all([cache.getOrLoad('a:1', load), cache.getOrLoad('a:1', load), cache.getOrLoad('b:1', async () => ABSENT)])
  // Each caller gets its own copy of the one loaded value (values are isolated from callers).
  .then(([x, y, z]) => console.log(`cjs ${x !== y && x.ok && y.ok} ${calls} ${z}`))
JS
  cat >"$dir/smoke.mjs" <<'JS'
import { Cache, buildKey } from 'herdless'
const cache = new Cache()
const key = buildKey({ namespace: 'users', entity: 'profile', id: 42 })
console.log(`esm ${key} ${await cache.getOrLoad(key, async () => 'Ada')}`)
JS
  local out
  out="$(cd "$dir" && node smoke.cjs && node smoke.mjs)"
  echo "$out"
  [ "$out" = "$(printf 'cjs true 1 undefined\nesm users:v1:profile:#42 Ada')" ] || {
    echo "install test: unexpected output from $dir" >&2
    exit 1
  }
}

new_project() { # <dir>
  mkdir -p "$1"
  (cd "$1" && npm init -y >/dev/null)
}

echo "-- npm install <folder> from a clean export of HEAD (the addon is built on install)"
install_dir="$root/target/node-install"
key="$(cd "$root" && git rev-parse HEAD:core HEAD:redis HEAD:bindings-node 2>/dev/null | tr '\n' ' ' || true)"
if [ -n "$key" ] && [ "$(cat "$install_dir/passed" 2>/dev/null || true)" = "$key" ]; then
  echo "   skipped: core/ and bindings-node/ unchanged at HEAD since the last success"
  exit 0
fi
rm -rf "$install_dir/repo"
mkdir -p "$install_dir/repo"
(cd "$root" && git archive HEAD) | tar -x -C "$install_dir/repo"
new_project "$work/from-folder"
(cd "$work/from-folder" &&
  CARGO_TARGET_DIR="$install_dir/target" npm install --no-audit --no-fund --loglevel=error \
    "$install_dir/repo/bindings-node")
smoke "$work/from-folder"
[ -n "$key" ] && echo "$key" >"$install_dir/passed"
echo "install from the source folder: ok"
