import { createRedis, deleteKeys, uniquePrefix } from '#test-support';
import { leaseKeys, redisLeases, type LeaseBackend } from '@fenced/coordinator';
import type { Redis } from 'ioredis';
import { describeLeaseStoreConformance } from './conformance.js';

const prefix = uniquePrefix('conformance');
let admin: Redis;
const clients = new Map<LeaseBackend, Redis>();

describeLeaseStoreConformance({
  name: 'redis',
  async setup() {
    admin = createRedis();
  },
  async teardown() {
    for (const client of clients.values()) client.disconnect();
    await deleteKeys(admin, prefix);
    admin.disconnect();
  },
  backend() {
    const client = createRedis();
    const backend = redisLeases(client, { keyPrefix: prefix });
    clients.set(backend, client);
    return backend;
  },
  async cut(backend) {
    clients.get(backend)!.disconnect();
  },
  isFree: async (lease) => (await admin.exists(leaseKeys(prefix, lease).lease)) === 0,
});
