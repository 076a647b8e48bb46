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

/**
 * SIGSTOP to `child`, resolving once every thread of it is stopped. `kill` only queues the
 * signal: the kernel stops one thread, which then stops the others, so on a busy machine a
 * server's worker thread could still answer a request sent right after `kill` returned.
 */
async function stopProcess(child) {
  const fs = require('node:fs')
  const allStopped = () => {
    let tasks
    try {
      tasks = fs.readdirSync(`/proc/${child.pid}/task`)
    } catch {
      return false
    }
    return tasks.every((task) => {
      let stat
      try {
        stat = fs.readFileSync(`/proc/${child.pid}/task/${task}/stat`, 'latin1')
      } catch {
        return true // a thread that exited meanwhile holds nothing back
      }
      // The state follows the command name, which is in parentheses and may hold any.
      const state = stat.slice(stat.lastIndexOf(')') + 1).trim()[0]
      return state === undefined || state === 'T'
    })
  }
  child.kill('SIGSTOP')
  const until = Date.now() + 10_000
  while (!allStopped()) {
    if (Date.now() > until) throw new Error(`process ${child.pid} did not stop`)
    await sleep(1)
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

/**
 * A private redis-server on a free port, without persistence, once it accepts connections:
 * `{ server, port, url }`. The caller stops it by its pid (`server.kill`); a server that does
 * not come up is stopped here.
 */
async function startRedis() {
  const { spawn } = require('node:child_process')
  const port = await freePort()
  const server = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  try {
    await within(
      10_000,
      new Promise((resolve, reject) => {
        server.on('exit', (code) => reject(new Error(`redis-server exited with ${code}`)))
        server.stdout.on('data', (d) => {
          if (/Ready to accept connections/.test(String(d))) resolve()
        })
      }),
      'redis-server start'
    )
  } catch (e) {
    server.kill('SIGKILL')
    throw e
  }
  return { server, port, url: `redis://127.0.0.1:${port}` }
}

module.exports = { freePort, listen, sleep, slowLoader, startRedis, stopProcess, within }
