'use strict'
// The npm loader picks the right platform package: with herdless and every platform package of
// dist/ in one node_modules, a child process per platform fakes process.platform, process.arch
// and the libc (process.report's glibcVersionRuntime), then requires herdless; the addon it asks
// for is answered by a stub (a foreign binary cannot load here), and the package asked for is
// printed. Platforms without a package must fail with the loader's message.
//
//   node scripts/test-platform-pick.js PROJECT DIST VERSION PLATFORM...
//   (PROJECT: an npm project with herdless installed, from which herdless is copied)
const { execFileSync, spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')

const [project, dist, version, ...platforms] = process.argv.slice(2)
const dir = fs.mkdtempSync(path.join(require('node:os').tmpdir(), 'herdless-pick-'))
const modules = path.join(dir, 'node_modules')
fs.mkdirSync(modules, { recursive: true })
fs.cpSync(path.join(project, 'node_modules', 'herdless'), path.join(modules, 'herdless'), { recursive: true })
for (const p of platforms) {
  const to = path.join(modules, `herdless-${p}`)
  fs.mkdirSync(to)
  execFileSync('tar', ['-xzf', path.join(dist, `herdless-${p}-${version}.tgz`), '-C', to, '--strip-components=1'])
}

// Run in the child: fake the platform, stub the addon's require, load herdless.
const child = `
const [platform, arch, glibc] = process.argv.slice(1)
Object.defineProperty(process, 'platform', { value: platform })
Object.defineProperty(process, 'arch', { value: arch })
const header = glibc === '-' ? {} : { glibcVersionRuntime: glibc }
Object.defineProperty(process, 'report', { value: { getReport: () => ({ header }) } })
const Module = require('node:module')
const load = Module._load
Module._load = function (request, parent, isMain) {
  if (/^herdless-/.test(request)) {
    require.resolve(request, { paths: [process.cwd()] }) // throws MODULE_NOT_FOUND when absent
    console.log('picked ' + request)
    // Whatever the loader reads of the addon: a class (it subclasses Cache, patches
    // FleetLock's prototype, re-exports functions and objects).
    return new Proxy({}, { get: (stub, name) => (stub[name] ??= class {}) })
  }
  return load.apply(this, arguments)
}
require('herdless')
`

function pick(platform, arch, glibc) {
  const r = spawnSync(process.execPath, ['-e', child, platform, arch, glibc], { cwd: dir, encoding: 'utf8' })
  return { out: r.stdout.trim(), err: r.stderr, status: r.status }
}

let failed = 0
function expect(what, got, ok) {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}: ${got}`)
  if (!ok) failed++
}

const cases = [
  ['linux', 'x64', '2.17', 'linux-x64-gnu'],
  ['linux', 'x64', '-', 'linux-x64-musl'],
  ['linux', 'arm64', '2.36', 'linux-arm64-gnu'],
  ['linux', 'arm64', '-', 'linux-arm64-musl'],
  ['darwin', 'x64', '-', 'darwin-x64'],
  ['darwin', 'arm64', '-', 'darwin-arm64'],
  // Official Node on Windows is MSVC-built: the loader asks for -msvc, then takes -gnu.
  ['win32', 'x64', '-', 'win32-x64-gnu'],
]
for (const [platform, arch, glibc, want] of cases) {
  if (!platforms.includes(want)) throw new Error(`test-platform-pick: no package for ${want} given`)
  const r = pick(platform, arch, glibc)
  const libc = platform === 'linux' ? (glibc === '-' ? ' musl' : ` glibc ${glibc}`) : ''
  expect(`${platform} ${arch}${libc}`, r.out || r.err.split('\n').find((l) => l.includes('Error')), r.out === `picked herdless-${want}` && r.status === 0)
}

// No package for the platform: the loader names it and the platforms that have one.
for (const [platform, arch] of [['freebsd', 'x64'], ['linux', 's390x'], ['win32', 'arm64']]) {
  const r = pick(platform, arch, '2.17')
  const msg = (r.err.match(/herdless: no native addon for this platform[^\n]*/) || [''])[0]
  const ok = r.status !== 0 && msg.includes('Prebuilt addons exist for') && platforms.every((p) => msg.includes(p))
  expect(`${platform} ${arch} (no package)`, msg.slice(0, 110) + '...', ok)
}

// The platform's package is missing (npm --omit=optional): the loader says how to get it.
fs.rmSync(path.join(modules, 'herdless-darwin-arm64'), { recursive: true })
const r = pick('darwin', 'arm64', '-')
const ok = r.status !== 0 && r.err.includes('Its package herdless-darwin-arm64 is not installed')
expect('darwin arm64 without its package', (r.err.match(/Its package[^:]*/) || [r.err])[0], ok)

fs.rmSync(dir, { recursive: true, force: true })
if (failed) {
  console.error(`test-platform-pick: ${failed} failed`)
  process.exit(1)
}
console.log(`test-platform-pick: ${cases.length + 4} cases pass`)
