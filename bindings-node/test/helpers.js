'use strict'
// Small helpers shared by the tests.

/** Resolves after `ms` milliseconds. */
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** A loader that counts its calls and answers `value` after `ms`. */
function slowLoader(ms, value) {
  const loader = async () => {
    loader.calls++
    await sleep(ms)
    return typeof value === 'function' ? value() : value
  }
  loader.calls = 0
  return loader
}

/** Awaits `promise`, failing after `ms` rather than hanging the test run. */
async function within(ms, promise, what = 'the operation') {
  let timer
  const limit = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms} ms`)), ms)
  })
  try {
    return await Promise.race([promise, limit])
  } finally {
    clearTimeout(timer)
  }
}

/** A free TCP port on 127.0.0.1 (for a private redis-server). */
function freePort() {
  const net = require('node:net')
  return new Promise((resolve, reject) => {
    const s = net.createServer()
    s.on('error', reject)
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address()
      s.close(() => resolve(port))
    })
  })
}

/** Starts an Express (or any `listen(port, host)`) app on a free port: its server and URL. */
async function listen(app) {
  const { once } = require('node:events')
  const server = app.listen(0, '127.0.0.1')
  await once(server, 'listening')
  return { server, url: `http://127.0.0.1:${server.address().port}` }
}

module.exports = { freePort, listen, sleep, slowLoader, within }
