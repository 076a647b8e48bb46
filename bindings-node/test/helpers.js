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

module.exports = { sleep, slowLoader, within }
