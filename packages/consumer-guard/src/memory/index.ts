// `@fenced/consumer-guard/memory`: fences in memory, for examples, unit tests and a deterministic
// simulator. It passes the fence-store conformance suite as every store does, within one process.
export { createMemoryGuard, memoryFences, type MemoryFencesOptions } from './memory-fences.js';
export { createMemoryFenceDatabase, MemoryFenceDatabase, type MemoryRow, type MemoryTransaction } from './memory-database.js';
