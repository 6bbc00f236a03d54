import { createEtcdClient, deleteEtcdPrefix, uniqueEtcdPrefix } from '#test-support';
import { etcdLeases, type EtcdLeases } from '@fenced/coordinator/etcd';
import type { Etcd3 } from 'etcd3';
import { describeLeaseStoreConformance } from './conformance.js';

const prefix = uniqueEtcdPrefix('conformance');
let admin: Etcd3;
const clients = new Map<EtcdLeases, Etcd3>();

describeLeaseStoreConformance({
  name: 'etcd',
  // Elections mint from etcd's revisions; a fence ahead of them is repaired by raising the lease's base.
  async setup() {
    admin = createEtcdClient();
  },
  async teardown() {
    for (const client of clients.values()) client.close();
    await deleteEtcdPrefix(admin, prefix);
    admin.close();
  },
  backend() {
    // A client per simulated process, as each replica has its own.
    const client = createEtcdClient();
    const backend = etcdLeases({ client, prefix });
    clients.set(backend, client);
    return backend;
  },
  async cut(backend) {
    // The client closed: every request of that process fails from now on, mid-term.
    clients.get(backend as EtcdLeases)!.close();
  },
  isFree: async (lease) => (await admin.get(`${prefix}lease/${lease}`).buffer()) === null,
});
