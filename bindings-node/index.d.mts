// Types of the ES module entry: the same as the CommonJS entry's (index.d.ts, generated).
export * from './index.js'
import * as herdless from './index.js'
export default herdless
