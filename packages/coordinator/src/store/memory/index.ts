// `@fenced/coordinator/memory`: leases in memory, for examples, unit tests and a deterministic
// simulator. It passes the lease-store conformance suite as every store does; its leases live and
// die with the process, so it elects among the coordinators of one process only.
export { memoryLeases, type MemoryLeases, type MemoryLeasesOptions } from './memory-backend.js';
export { createMemoryLeaseServer, MemoryLeaseServer, type MemoryElection, type MemoryLeaseServerOptions, type MemoryLeaseSnapshot } from './memory-server.js';
