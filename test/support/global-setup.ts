import type { TestProject } from 'vitest/node';
import { resolveServices } from './services.js';

declare module 'vitest' {
  export interface ProvidedContext {
    databaseUrl: string;
    redisUrl: string;
    /** MariaDB/MySQL for the MySQL fence store's tests; empty in projects that start none. */
    mysqlUrl: string;
  }
}

/** Resolves the services once per run and hands their URLs to every worker. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  // MariaDB only where its tests run: the unit project (a private server, a second or two to start).
  const services = await resolveServices({ mysql: project.name === 'unit' || process.env['MYSQL_URL'] !== undefined });
  project.provide('databaseUrl', services.databaseUrl);
  project.provide('redisUrl', services.redisUrl);
  project.provide('mysqlUrl', services.mysqlUrl);
  return services.stop;
}
