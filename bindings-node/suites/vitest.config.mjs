// vitest runs only @keyv/test-suite here (test/keyv_suite.test.js starts it); the binding's own
// tests are node:test files under test/.
import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    root: import.meta.dirname,
    include: ['*.suite.mjs'],
    testTimeout: 20_000,
    hookTimeout: 20_000,
    fileParallelism: false,
    watch: false,
  },
})
