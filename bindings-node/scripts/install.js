'use strict'
// npm's install hook: make sure the native addon for this platform exists.
//
// 1. The addon is already here (a packed tarball ships the one built by `prepack`, and a
//    source checkout keeps the last build): nothing to do.
// 2. A source checkout (this crate's Cargo.toml and the core crate beside it): build the
//    addon in release, with the napi CLI when the dev dependencies are installed (the same
//    command as `npm run build`, so a later build is a no-op), else with cargo alone.
// 3. Anything else: fail and say what is missing.
const { spawnSync } = require('node:child_process')
const { copyFileSync, existsSync, readFileSync } = require('node:fs')
const { dirname, join } = require('node:path')
const { addonFile } = require('./platform.js')

const root = join(__dirname, '..')
const target = join(root, addonFile())

function run(cmd, args) {
  const r = spawnSync(cmd, args, { cwd: root, stdio: 'inherit' })
  if (r.error) throw r.error
  if (r.status !== 0) process.exit(r.status || 1)
}

function napiCli() {
  try {
    const pkgPath = require.resolve('@napi-rs/cli/package.json', { paths: [root] })
    const pkg = JSON.parse(readFileSync(pkgPath, 'utf8'))
    const bin = typeof pkg.bin === 'string' ? pkg.bin : pkg.bin.napi
    return join(dirname(pkgPath), bin)
  } catch {
    return null
  }
}

function cargoArtifact() {
  const meta = spawnSync('cargo', ['metadata', '--format-version', '1', '--no-deps'], {
    cwd: root,
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  })
  if (meta.status !== 0) throw new Error(`cargo metadata failed: ${meta.stderr}`)
  const dir = join(JSON.parse(meta.stdout).target_directory, 'release')
  const name = { darwin: 'libherdless_node.dylib', win32: 'herdless_node.dll' }[process.platform]
  return join(dir, name || 'libherdless_node.so')
}

if (existsSync(target)) process.exit(0)

if (!existsSync(join(root, 'Cargo.toml')) || !existsSync(join(root, '..', 'core', 'Cargo.toml'))) {
  console.error(
    `herdless: no native addon for this platform (${addonFile()}) and no Rust sources to ` +
      'build one. Install from the source folder (bindings-node/ of the herdless repository) ' +
      'or from a tarball packed on this platform.'
  )
  process.exit(1)
}

const cli = napiCli()
if (cli) {
  run(process.execPath, [cli, 'build', '--platform', '--release', '--no-js', '--dts', 'index.d.ts'])
} else {
  run('cargo', ['build', '--release', '--locked', '--manifest-path', join(root, 'Cargo.toml')])
  copyFileSync(cargoArtifact(), target)
}
if (!existsSync(target)) {
  console.error(`herdless: the build did not produce ${target}`)
  process.exit(1)
}
