// The package's ES module entry: the same objects as the CommonJS entry.
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const herdless = require('./index.js')

export const { Cache, FleetLock, buildKey, defaults, ABSENT, testing } = herdless
export default herdless
