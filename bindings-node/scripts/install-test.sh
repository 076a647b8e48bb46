#!/usr/bin/env bash
# A fresh Node project installs herdless the two ways the README gives, and uses it from
# CommonJS and ESM:
#   1. a tarball made by `npm pack` (which ships the addon built by `prepack`);
#   2. the source folder of a clean export of the repository's HEAD (no addon, no
#      node_modules), whose install script builds the addon with cargo alone.
# The second is skipped when HEAD's core/ and bindings-node/ are unchanged since its last
# success (it rebuilds both crates from a new path, in <repo>/target/node-install).
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
  .then(([x, y, z]) => console.log(`cjs ${x === y} ${calls} ${z}`))
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

echo "-- 1. npm pack, then npm install <tarball> in a fresh project"
(cd "$here" && npm pack --pack-destination "$work" --loglevel=error >/dev/null)
tarball="$(ls "$work"/herdless-*.tgz)"
tar -tzf "$tarball" | sed 's/^/   /'
new_project "$work/from-tarball"
(cd "$work/from-tarball" && npm install --no-audit --no-fund --loglevel=error "$tarball")
smoke "$work/from-tarball"

echo "-- 2. npm install <folder> from a clean export of HEAD (the addon is built on install)"
install_dir="$root/target/node-install"
key="$(cd "$root" && git rev-parse HEAD:core HEAD:bindings-node 2>/dev/null | tr '\n' ' ' || true)"
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
echo "install paths: ok"
