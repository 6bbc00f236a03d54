import type { TestProject } from 'vitest/node';
import { resolveServices } from './services.js';

declare module 'vitest' {
  export interface ProvidedContext {
    databaseUrl: string;
    redisUrl: string;
  }
}

/** Resolves the services once per run and hands their URLs to every worker. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const services = await resolveServices();
  project.provide('databaseUrl', services.databaseUrl);
  project.provide('redisUrl', services.redisUrl);
  return services.stop;
}
