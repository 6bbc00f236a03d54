import { createMemoryLeaseServer, memoryLeases, type MemoryLeases } from '@fenced/coordinator/memory';
import { describeLeaseStoreConformance } from './conformance.js';

// One server is the store; each backend on it is one process's connection to it.
const server = createMemoryLeaseServer();

describeLeaseStoreConformance({
  name: 'memory',
  async setup() {},
  async teardown() {},
  backend: () => memoryLeases({ server }),
  async cut(backend) {
    // The process's connection gone: every request of that process fails from now on, mid-term.
    (backend as MemoryLeases).close();
  },
  isFree: async (lease) => server.holder(lease) === null,
});
