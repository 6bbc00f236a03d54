// `@fenced/coordinator/etcd`: leases on etcd, tokens from its revisions. A subpath of its own, so
// that a deployment without etcd never loads its client.
export { etcdLeases, type EtcdLeases, type EtcdLeasesOptions } from './etcd-backend.js';
export { etcdClusterInfo, type EtcdClusterInfo } from './etcd-cluster-info.js';
export type { EtcdTimeSource } from './etcd-clock.js';
export { inspectEtcdLeases, type EtcdLeaseInspection } from './etcd-inspect.js';
export { etcdFailure } from './etcd-errors.js';
