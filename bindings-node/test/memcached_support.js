'use strict'
// A private memcached for the memcached tier's tests, killed, stopped and restarted by pid,
// and raw meta commands to plant what herdless did not write.
const net = require('node:net')
const { spawn, spawnSync } = require('node:child_process')
const { freePort, sleep } = require('./helpers.js')

const haveMemcached = spawnSync('memcached', ['-V']).status === 0

class Memcached {
  /** A memcached on a free port, once it accepts connections. */
  static async start() {
    const m = new Memcached(await freePort())
    await m.start()
    return m
  }

  constructor(port) {
    this.port = port
    this.child = null
    this.url = `memcached://127.0.0.1:${port}`
  }

  async start() {
    const args = ['-l', '127.0.0.1', '-U', '0', '-p', String(this.port)]
    // memcached refuses to run as root unless told which user to be.
    if (process.getuid && process.getuid() === 0) args.push('-u', 'root')
    const child = spawn('memcached', args, { stdio: 'ignore' })
    this.child = child
    child.exited = new Promise((resolve) => child.once('exit', resolve))
    const until = Date.now() + 10_000
    for (;;) {
      const up = await new Promise((resolve) => {
        const s = net.connect(this.port, '127.0.0.1', () => {
          s.end()
          resolve(true)
        })
        s.on('error', () => resolve(false))
      })
      if (up) return
      if (Date.now() > until) throw new Error(`memcached on ${this.port} did not start`)
      await sleep(20)
    }
  }

  async kill() {
    const child = this.child
    this.child = null
    if (child && child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL')
      await child.exited
    }
  }

  signal(sig) {
    this.child.kill(sig)
  }

  /** Sends meta commands; what memcached answered, up to its no-op's answer. */
  raw(command) {
    return new Promise((resolve, reject) => {
      const s = net.connect(this.port, '127.0.0.1')
      let out = Buffer.alloc(0)
      s.on('data', (d) => {
        out = Buffer.concat([out, d])
        if (out.toString('latin1').endsWith('MN\r\n')) {
          s.end()
          resolve(out.toString('latin1'))
        }
      })
      s.on('error', reject)
      s.write(Buffer.concat([Buffer.from(command, 'latin1'), Buffer.from('mn\r\n')]))
    })
  }

  /** Stores `data` under the item `name` (a write from outside herdless), for `ttlMs` (0: no expiry). */
  async put(name, data, ttlMs = 0) {
    const bytes = Buffer.from(data)
    const ttl = ttlMs ? Math.ceil(ttlMs / 1000) : 0
    const answer = await this.raw(`ms ${name} ${bytes.length} T${ttl}\r\n${bytes.toString('latin1')}\r\n`)
    if (!answer.startsWith('HD')) throw new Error(`memcached refused the write: ${answer}`)
  }

  /** A cold key's lease no live process holds (a leader that died): its marker. */
  plantLease(name, ttlMs) {
    return this.put(name, `herdless:lease:${'0'.repeat(32)}`, Math.max(ttlMs, 1))
  }
}

module.exports = { Memcached, haveMemcached }
