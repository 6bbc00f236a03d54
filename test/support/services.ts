import net from 'node:net';

/**
 * Finds the services tests run against, in this order:
 * 1. `DATABASE_URL` / `REDIS_URL`;
 * 2. the loopback defaults (PostgreSQL 127.0.0.1:5432 user postgres db test, Redis 127.0.0.1:6379) if they answer;
 * 3. testcontainers, when a Docker engine is reachable;
 * 4. otherwise a clear error saying what to provide.
 */
export interface ServiceUrls {
  readonly databaseUrl: string;
  readonly redisUrl: string;
  /** Stops containers started for this run (no-op for external services). */
  readonly stop: () => Promise<void>;
}

const DEFAULT_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/test';
const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';

function answers(host: string, port: number, timeoutMs = 1500): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

async function dockerReachable(): Promise<boolean> {
  try {
    const { getContainerRuntimeClient } = await import('testcontainers');
    await getContainerRuntimeClient();
    return true;
  } catch {
    return false;
  }
}

export async function resolveServices(): Promise<ServiceUrls> {
  const stops: Array<() => Promise<unknown>> = [];
  let databaseUrl = process.env['DATABASE_URL'];
  let redisUrl = process.env['REDIS_URL'];

  if (databaseUrl === undefined && (await answers('127.0.0.1', 5432))) databaseUrl = DEFAULT_DATABASE_URL;
  if (redisUrl === undefined && (await answers('127.0.0.1', 6379))) redisUrl = DEFAULT_REDIS_URL;

  if ((databaseUrl === undefined || redisUrl === undefined) && (await dockerReachable())) {
    if (databaseUrl === undefined) {
      const { PostgreSqlContainer } = await import('@testcontainers/postgresql');
      const pg = await new PostgreSqlContainer('postgres:15-alpine').start();
      stops.push(() => pg.stop());
      databaseUrl = pg.getConnectionUri();
    }
    if (redisUrl === undefined) {
      const { GenericContainer } = await import('testcontainers');
      const redis = await new GenericContainer('redis:7-alpine').withExposedPorts(6379).start();
      stops.push(() => redis.stop());
      redisUrl = `redis://${redis.getHost()}:${redis.getMappedPort(6379)}`;
    }
  }

  const missing = [
    databaseUrl === undefined ? 'PostgreSQL (set DATABASE_URL, or run one on 127.0.0.1:5432 with user postgres and database test)' : null,
    redisUrl === undefined ? 'Redis (set REDIS_URL, or run one on 127.0.0.1:6379)' : null,
  ].filter((m): m is string => m !== null);
  if (missing.length > 0) {
    throw new Error(`fenced tests need ${missing.join(' and ')}; no Docker engine was reachable for testcontainers either.`);
  }
  return {
    databaseUrl: databaseUrl!,
    redisUrl: redisUrl!,
    stop: async () => {
      await Promise.all(stops.map((s) => s()));
    },
  };
}
