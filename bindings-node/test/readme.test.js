'use strict'
// The README's JavaScript blocks run as written, and every `console.log(...) // text` prints
// exactly `text`.
const test = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const { mkdirSync, readFileSync, rmSync, writeFileSync } = require('node:fs')
const { join } = require('node:path')

const root = join(__dirname, '..')
const readme = readFileSync(join(root, 'README.md'), 'utf8')
const jsBlocks = (text) => [...text.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1])
// The repository's front page shows a Node quick start too; it must run as well.
const rootBlocks = jsBlocks(readFileSync(join(root, '..', 'README.md'), 'utf8'))
const blocks = [...jsBlocks(readme), ...rootBlocks]

test('the READMEs have JavaScript blocks', () => {
  assert.ok(blocks.length - rootBlocks.length >= 2)
  assert.ok(rootBlocks.length >= 1)
})

blocks.forEach((code, i) => {
  test(`README block ${i + 1} runs and prints what its comments say`, { timeout: 30_000 }, () => {
    const esm = /^import /m.test(code)
    // Inside the package, so that `herdless` resolves to it (self-reference).
    const dir = join(root, 'test', '.readme')
    mkdirSync(dir, { recursive: true })
    const file = join(dir, `block-${i + 1}.${esm ? 'mjs' : 'cjs'}`)
    writeFileSync(file, code)
    try {
      // The Redis example runs against no server (the tier degrades to local loads); the
      // Redis behaviour itself is tested in redis.test.js against a private server.
      const env = { ...process.env, REDIS_URL: 'redis://127.0.0.1:1' }
      const r = spawnSync(process.execPath, [file], { encoding: 'utf8', timeout: 20_000, env })
      assert.equal(r.status, 0, `exit ${r.status}: ${r.stderr}`)
      const expected = [...code.matchAll(/console\.log\(.*\)\s*\/\/ (.*)$/gm)].map((m) => m[1].trim())
      const printed = r.stdout.trim().split('\n')
      assert.deepEqual(printed, expected)
    } finally {
      rmSync(file, { force: true })
    }
  })
})
