'use strict'
// The Express example over HTTP: a stampede reaches the origin once, /metrics shows it.
const test = require('node:test')
const assert = require('node:assert/strict')
const { once } = require('node:events')
const { createApp } = require('./app.js')

test('a stampede on a product page reaches the origin once', async () => {
  const origin = {
    calls: 0,
    async product(id) {
      this.calls++
      await new Promise((r) => setTimeout(r, 100))
      return id === 404 ? null : { id, name: `Product ${id}` }
    },
  }
  const server = createApp(origin).listen(0, '127.0.0.1')
  await once(server, 'listening')
  const url = `http://127.0.0.1:${server.address().port}`
  try {
    const answers = await Promise.all(Array.from({ length: 50 }, () => fetch(`${url}/products/7`)))
    assert.deepEqual([...new Set(answers.map((r) => r.status))], [200])
    assert.deepEqual(await answers[0].json(), { id: 7, name: 'Product 7' })
    assert.equal(origin.calls, 1)
    assert.equal((await fetch(`${url}/products/404`)).status, 404)
    assert.equal((await fetch(`${url}/products/404`)).status, 404)
    assert.equal(origin.calls, 2)
    const scrape = await (await fetch(`${url}/metrics`)).text()
    assert.match(scrape, /^shop_requests_total 53$/m) // the scrape is the 53rd request
    assert.match(scrape, /^herdless_loads_total\{namespace="products"\} 2$/m)
    assert.match(scrape, /^herdless_coalesced_waiters_total\{namespace="products"\} \d+$/m)
  } finally {
    server.close()
  }
})
