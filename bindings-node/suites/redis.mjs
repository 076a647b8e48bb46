// A private redis-server on a free port for the suites (as test/lifecycle.test.js does): none
// on PATH skips the Redis tier with the reason, except under CI=true, where it fails.
import { spawn, spawnSync } from 'node:child_process'
import helpers from '../test/helpers.js'

const { freePort } = helpers

export const haveRedis = spawnSync('redis-server', ['--version']).status === 0
export const ci = process.env.CI === 'true'
/** Why the Redis tier is skipped, or false when it runs. */
export const redisSkip = !haveRedis && !ci && 'redis-server is not on PATH'

/** Starts redis-server: `{ url, stop() }`. */
export async function startRedis() {
  if (!haveRedis) throw new Error('redis-server is not installed, and CI=true requires the Redis tier to run')
  const port = await freePort()
  const server = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('redis-server did not start within 10 s')), 10_000)
    server.on('exit', (code) => reject(new Error(`redis-server exited with ${code}`)))
    server.stdout.on('data', (d) => {
      if (/Ready to accept connections/.test(String(d))) {
        clearTimeout(timer)
        resolve()
      }
    })
  })
  return { url: `redis://127.0.0.1:${port}`, stop: () => server.kill() }
}
