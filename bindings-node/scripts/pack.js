#!/usr/bin/env node
'use strict'
// The npm packages, in the napi-rs layout: `herdless` (the JS entry points, types, the
// integrations and the loader) lists one package per prebuilt platform of scripts/targets in
// its optionalDependencies (`herdless-linux-x64-gnu`, `herdless-darwin-arm64`, ...: the addon
// alone, with `os`, `cpu` and, on Linux, `libc`, so npm installs it on that platform only).
//
//   node scripts/pack.js DIST           stages the main package and one package per addon built
//                                       (herdless.<platform>.node in bindings-node/; this
//                                       machine's at least) under target/package/npm and packs
//                                       them into DIST
//   node scripts/pack.js --check DIST   checks what `npm pack --dry-run` of each staged
//                                       package lists and what DIST's tarballs hold: exactly
//                                       the files that should ship; and the newest glibc
//                                       symbol each glibc addon needs
//
// The source package.json stays the contributors' (an install script that builds the addon
// from source, dev tools); the packed one is derived from it here.
const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const { addonFile, platformName, platformPackage } = require('./platform.js')
const { targets } = require('./targets.js')

const here = path.join(__dirname, '..')
const root = path.join(here, '..')
const staging = path.join(root, 'target', 'package', 'npm')
const source = JSON.parse(fs.readFileSync(path.join(here, 'package.json'), 'utf8'))

// The glibc addons are linked by zig against glibc 2.17's symbols (scripts/package), like the
// wheels' manylinux2014 tag: they load wherever Node itself runs.
const MAX_GLIBC = '2.17'

/** What each platform package says it needs, beside its os/cpu/libc. */
const NEEDS = {
  gnu: `glibc ${MAX_GLIBC} or newer`,
  musl: 'musl libc 1.2 or newer: Alpine 3.13+',
  darwin: 'macOS 10.12 or newer on x64, 11 on arm64',
  win32: 'Windows 10 or newer; built with MinGW-w64, loads in the official Node',
}

const repository = (() => {
  const cargo = fs.readFileSync(path.join(root, 'Cargo.toml'), 'utf8')
  const m = cargo.match(/^repository = "([^"]+)"/m)
  if (!m) throw new Error('pack: no repository in the workspace Cargo.toml')
  return m[1]
})()

const shared = {
  version: source.version,
  license: source.license,
  homepage: `${repository}#readme`,
  repository: { type: 'git', url: `git+${repository}.git`, directory: 'bindings-node' },
  bugs: { url: `${repository}/issues` },
  engines: source.engines,
}

/** The files of the main package, as `npm pack` lists them. */
function mainFiles() {
  const lib = fs.readdirSync(path.join(here, 'lib')).map((f) => `lib/${f}`)
  return [
    'README.md',
    'index.d.mts',
    'index.d.ts',
    'index.js',
    'index.mjs',
    ...lib,
    'package.json',
    'scripts/platform.js',
  ].sort()
}

/** The platform packages to pack: this machine's, and every other target whose addon is
 * built (scripts/package cross). */
function platforms() {
  return targets()
    .map((t) => ({ name: t.platform, pkg: platformPackage(t.platform), addon: addonFile(t.platform) }))
    .filter((p) => p.name === platformName() || fs.existsSync(path.join(here, p.addon)))
}

function stageMain() {
  const dir = path.join(staging, 'herdless')
  fs.rmSync(dir, { recursive: true, force: true })
  for (const f of mainFiles()) {
    if (f === 'package.json') continue
    fs.mkdirSync(path.dirname(path.join(dir, f)), { recursive: true })
    fs.copyFileSync(path.join(here, f), path.join(dir, f))
  }
  const pkg = {
    name: source.name,
    description: source.description,
    keywords: source.keywords,
    ...shared,
    main: source.main,
    types: source.types,
    exports: source.exports,
    files: [...new Set(mainFiles().map((f) => f.split('/')[0]))].filter((f) => f !== 'package.json'),
    // Every target's, built here or not: what a release publishes (release.yml).
    optionalDependencies: Object.fromEntries(targets().map((t) => [platformPackage(t.platform), source.version])),
    peerDependencies: source.peerDependencies,
    peerDependenciesMeta: source.peerDependenciesMeta,
  }
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify(pkg, null, 2) + '\n')
  return dir
}

function stagePlatform(p) {
  const dir = path.join(staging, p.pkg)
  fs.rmSync(dir, { recursive: true, force: true })
  fs.mkdirSync(dir, { recursive: true })
  const addon = path.join(here, p.addon)
  if (!fs.existsSync(addon)) {
    throw new Error(`pack: ${addon} is missing: build it first (npm run build)`)
  }
  fs.copyFileSync(addon, path.join(dir, p.addon))
  const [os, cpu, abi] = p.name.split('-')
  const needs = os === 'linux' ? NEEDS[abi] : NEEDS[os]
  const pkg = {
    name: p.pkg,
    description: `The prebuilt native addon of herdless for ${p.name} (${needs}); install herdless, not this.`,
    ...shared,
    os: [os],
    cpu: [cpu],
    ...(os !== 'linux' ? {} : abi === 'gnu' ? { libc: ['glibc'] } : { libc: ['musl'] }),
    main: p.addon,
    files: [p.addon],
  }
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify(pkg, null, 2) + '\n')
  fs.writeFileSync(
    path.join(dir, 'README.md'),
    `# ${p.pkg}\n\nThe prebuilt native addon of [herdless](https://www.npmjs.com/package/herdless) ` +
      `for ${p.name}. Install \`herdless\`: npm picks this package on this platform by itself.\n`
  )
  return dir
}

function npm(args, cwd) {
  return execFileSync('npm', [...args, '--loglevel=error'], { cwd, encoding: 'utf8' })
}

function expected() {
  return [
    { dir: path.join(staging, 'herdless'), tarball: `herdless-${source.version}.tgz`, files: mainFiles() },
    ...platforms().map((p) => ({
      dir: path.join(staging, p.pkg),
      tarball: `${p.pkg}-${source.version}.tgz`,
      files: ['README.md', p.addon, 'package.json'].sort(),
    })),
  ]
}

function pack(dist) {
  fs.mkdirSync(dist, { recursive: true })
  for (const f of fs.readdirSync(dist)) {
    if (f.endsWith('.tgz')) fs.rmSync(path.join(dist, f))
  }
  const dirs = [stageMain(), ...platforms().map(stagePlatform)]
  for (const dir of dirs) {
    const out = JSON.parse(npm(['pack', '--json', '--pack-destination', dist], dir))
    console.log(`pack: ${path.join(dist, out[0].filename)} (${out[0].entryCount} files, ${out[0].size} bytes)`)
  }
}

function newestGlibc(file) {
  const symbols = execFileSync('objdump', ['-T', file], { encoding: 'utf8' })
  const versions = [...symbols.matchAll(/GLIBC_([0-9.]+)/g)].map((m) => m[1])
  const key = (v) => v.split('.').map(Number)
  versions.sort((a, b) => {
    const [x, y] = [key(a), key(b)]
    for (let i = 0; i < Math.max(x.length, y.length); i++) {
      if ((x[i] || 0) !== (y[i] || 0)) return (x[i] || 0) - (y[i] || 0)
    }
    return 0
  })
  return versions[versions.length - 1]
}

function check(dist) {
  let failed = false
  const fail = (msg) => {
    console.error(`pack --check: ${msg}`)
    failed = true
  }
  for (const e of expected()) {
    const dry = JSON.parse(npm(['pack', '--dry-run', '--json'], e.dir))[0]
    const listed = dry.files.map((f) => f.path).sort()
    if (JSON.stringify(listed) !== JSON.stringify(e.files)) {
      fail(`npm pack --dry-run of ${e.dir} lists ${listed.join(', ')}; it should ship ${e.files.join(', ')}`)
    }
    const tarball = path.join(dist, e.tarball)
    if (!fs.existsSync(tarball)) {
      fail(`${tarball} is missing`)
      continue
    }
    const held = execFileSync('tar', ['-tzf', tarball], { encoding: 'utf8' })
      .split('\n')
      .filter(Boolean)
      .map((f) => f.replace(/^package\//, ''))
      .sort()
    if (JSON.stringify(held) !== JSON.stringify(e.files)) {
      fail(`${tarball} holds ${held.join(', ')}; it should hold ${e.files.join(', ')}`)
    }
    console.log(`${e.tarball}: ${held.join(', ')}`)
  }
  for (const p of platforms().filter((p) => p.name.endsWith('-gnu') && p.name.startsWith('linux-'))) {
    const glibc = newestGlibc(path.join(staging, p.pkg, p.addon))
    const [a, b] = [glibc, MAX_GLIBC].map((v) => v.split('.').map(Number))
    if (a[0] > b[0] || (a[0] === b[0] && a[1] > b[1])) {
      fail(`${p.addon} needs glibc ${glibc}, newer than the ${MAX_GLIBC} its package promises`)
    } else {
      console.log(`${p.addon}: needs glibc ${glibc} at most (promised: ${MAX_GLIBC})`)
    }
  }
  if (failed) process.exit(1)
}

const args = process.argv.slice(2)
if (args[0] === '--check' && args[1]) check(path.resolve(args[1]))
else if (args.length === 1 && !args[0].startsWith('-')) pack(path.resolve(args[0]))
else {
  console.error('usage: node scripts/pack.js DIST | --check DIST')
  process.exit(2)
}
