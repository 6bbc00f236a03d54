import type { TestProject } from 'vitest/node';
import { resolveServices } from './services.js';

declare module 'vitest' {
  export interface ProvidedContext {
    databaseUrl: string;
    redisUrl: string;
    /** MariaDB/MySQL for the MySQL fence store's tests; empty in projects that start none. */
    mysqlUrl: string;
    /** etcd's client endpoints (comma-separated) for the etcd lease store's tests; empty in projects that start none. */
    etcdEndpoints: string;
  }
}

/** Resolves the services once per run and hands their URLs to every worker. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  // MariaDB only where its tests run: the unit project (a private server, a second or two to start).
  // etcd likewise: a private three-member cluster for the unit project, shared by its files.
  const services = await resolveServices({ mysql: project.name === 'unit' || process.env['MYSQL_URL'] !== undefined, etcd: project.name === 'unit' || process.env['ETCD_ENDPOINTS'] !== undefined });
  project.provide('databaseUrl', services.databaseUrl);
  project.provide('redisUrl', services.redisUrl);
  project.provide('mysqlUrl', services.mysqlUrl);
  project.provide('etcdEndpoints', services.etcdEndpoints);
  return services.stop;
}
