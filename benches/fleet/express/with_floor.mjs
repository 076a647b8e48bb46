// Not a cache: a Map that keeps every product for good (no ttl, no Redis, no stampede
// protection). The floor of the Express fleet's CPU per request, what the app costs without
// a cache's work; a contender's CPU above it is its cache's.
import { serve } from './catalog.mjs'

const kept = new Map()
serve(async (key, load) => {
  let value = kept.get(key)
  if (value === undefined) kept.set(key, (value = await load()))
  return value
})
