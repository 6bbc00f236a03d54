import { Redis } from 'ioredis';
import mysql from 'mysql2/promise';
import pg from 'pg';
// By path rather than by package name: the globalSetup runs before the `@fenced/source` condition applies.
import { tcpAnswers as answers } from '../../packages/chaos/src/postgres-url.js';
import { startMariadbServer } from '../../packages/chaos/src/mysql/mariadb-server.js';
import { startEtcdCluster } from '../../packages/chaos/src/etcd/etcd-cluster.js';

/**
 * Finds the services tests run against, in this order:
 * 1. `DATABASE_URL` / `REDIS_URL`;
 * 2. the loopback defaults (PostgreSQL 127.0.0.1:5432 user postgres db test, Redis 127.0.0.1:6379) if they answer;
 * 3. testcontainers, when a Docker engine is reachable;
 * 4. otherwise a clear error saying what to provide.
 * A service that is named or found is also checked for real (PostgreSQL answers a query, Redis a
 * PING), so a wrong URL stops the run at once with one line instead of failing every test file.
 */
export interface ServiceUrls {
  readonly databaseUrl: string;
  readonly redisUrl: string;
  /**
   * MariaDB/MySQL: `MYSQL_URL`, else a private MariaDB started for this run on a free loopback port
   * with its own data directory (removed at the end); empty when not asked for.
   */
  readonly mysqlUrl: string;
  /** etcd's client endpoints, comma-separated: `ETCD_ENDPOINTS`, or a private three-member cluster; empty where none is started. */
  readonly etcdEndpoints: string;
  /** Stops containers started for this run (no-op for external services). */
  readonly stop: () => Promise<void>;
}

/** A service the tests cannot use; the message is one line that says what to set. */
export class ServiceSetupError extends Error {
  override readonly name = 'ServiceSetupError';
}

const DEFAULT_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/test';
const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';
const CHECK_TIMEOUT_MS = 5000;

async function dockerReachable(): Promise<boolean> {
  try {
    const { getContainerRuntimeClient } = await import('testcontainers');
    await getContainerRuntimeClient();
    return true;
  } catch {
    return false;
  }
}

const reason = (err: unknown) => (err instanceof Error ? err.message : String(err)).split('\n')[0];

/** Connects to PostgreSQL and runs one query; throws a one-line ServiceSetupError naming the fix. */
export async function checkPostgres(url: string, source: string): Promise<void> {
  const fix = `set DATABASE_URL to a PostgreSQL database you can connect to (default ${DEFAULT_DATABASE_URL})`;
  try {
    new URL(url);
  } catch {
    throw new ServiceSetupError(`${source} is not a valid URL (${JSON.stringify(url)}): ${fix}`);
  }
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: CHECK_TIMEOUT_MS });
  client.on('error', () => {});
  try {
    await client.connect();
    await client.query('SELECT 1');
  } catch (err) {
    throw new ServiceSetupError(`PostgreSQL at ${source} cannot be used: ${reason(err)}; ${fix}`);
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** Connects to Redis and sends PING; throws a one-line ServiceSetupError naming the fix. */
export async function checkRedis(url: string, source: string): Promise<void> {
  const fix = `set REDIS_URL to a Redis server you can reach (default ${DEFAULT_REDIS_URL})`;
  try {
    new URL(url);
  } catch {
    throw new ServiceSetupError(`${source} is not a valid URL (${JSON.stringify(url)}): ${fix}`);
  }
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: CHECK_TIMEOUT_MS });
  // The socket's own error (ECONNREFUSED, …) says more than the "Connection is closed" that follows.
  let socketError: unknown;
  redis.on('error', (err) => (socketError ??= err));
  try {
    await redis.connect();
    await redis.ping();
  } catch (err) {
    throw new ServiceSetupError(`Redis at ${source} cannot be used: ${reason(socketError ?? err)}; ${fix}`);
  } finally {
    redis.disconnect();
  }
}

/** Connects to MySQL/MariaDB and runs one query; throws a one-line ServiceSetupError naming the fix. */
export async function checkMysql(url: string, source: string): Promise<void> {
  const fix = 'set MYSQL_URL to a MySQL 8 or MariaDB 10.6+ database you can connect to, or unset it so the tests start their own MariaDB (apt-get install mariadb-server)';
  try {
    new URL(url);
  } catch {
    throw new ServiceSetupError(`${source} is not a valid URL (${JSON.stringify(url)}): ${fix}`);
  }
  let connection: mysql.Connection | undefined;
  try {
    connection = await mysql.createConnection({ uri: url, connectTimeout: CHECK_TIMEOUT_MS });
    await connection.query('SELECT 1');
  } catch (err) {
    throw new ServiceSetupError(`MySQL at ${source} cannot be used: ${reason(err)}; ${fix}`);
  } finally {
    await connection?.end().catch(() => undefined);
  }
}

/** The MySQL/MariaDB of the run: `MYSQL_URL`, or a private MariaDB started now. */
async function resolveMysql(stops: Array<() => Promise<unknown>>): Promise<string> {
  const named = process.env['MYSQL_URL'] || undefined;
  if (named !== undefined) {
    await checkMysql(named, 'MYSQL_URL');
    return named;
  }
  try {
    const server = await startMariadbServer();
    stops.push(() => server.stop());
    return server.url;
  } catch (err) {
    throw new ServiceSetupError(`no MySQL/MariaDB for the tests: ${reason(err)}; set MYSQL_URL, or install mariadb-server so the tests start their own`);
  }
}

/** The etcd of the run: `ETCD_ENDPOINTS` (comma-separated client URLs), or a private three-member cluster started now. */
async function resolveEtcd(stops: Array<() => Promise<unknown>>): Promise<string> {
  const named = process.env['ETCD_ENDPOINTS'] || undefined;
  if (named !== undefined) return named;
  try {
    const cluster = await startEtcdCluster();
    stops.push(() => cluster.stop());
    return cluster.endpoints.join(',');
  } catch (err) {
    throw new ServiceSetupError(`no etcd for the tests: ${reason(err)}; set ETCD_ENDPOINTS, or install etcd-server so the tests start their own cluster`);
  }
}

export async function resolveServices(options: { readonly mysql?: boolean; readonly etcd?: boolean } = {}): Promise<ServiceUrls> {
  const stops: Array<() => Promise<unknown>> = [];
  try {
    return await resolveInto(stops, options);
  } catch (err) {
    // What started before the failure stops with it: a failed setup leaves no server running.
    await Promise.allSettled(stops.map((s) => s()));
    throw err;
  }
}

async function resolveInto(stops: Array<() => Promise<unknown>>, options: { readonly mysql?: boolean; readonly etcd?: boolean }): Promise<ServiceUrls> {
  let databaseUrl = process.env['DATABASE_URL'] || undefined;
  let redisUrl = process.env['REDIS_URL'] || undefined;
  if (databaseUrl !== undefined) await checkPostgres(databaseUrl, 'DATABASE_URL');
  if (redisUrl !== undefined) await checkRedis(redisUrl, 'REDIS_URL');

  if (databaseUrl === undefined && (await answers('127.0.0.1', 5432))) {
    databaseUrl = DEFAULT_DATABASE_URL;
    await checkPostgres(databaseUrl, `the loopback default ${DEFAULT_DATABASE_URL}`);
  }
  if (redisUrl === undefined && (await answers('127.0.0.1', 6379))) {
    redisUrl = DEFAULT_REDIS_URL;
    await checkRedis(redisUrl, `the loopback default ${DEFAULT_REDIS_URL}`);
  }

  if ((databaseUrl === undefined || redisUrl === undefined) && (await dockerReachable())) {
    if (databaseUrl === undefined) {
      const { PostgreSqlContainer } = await import('@testcontainers/postgresql');
      const container = await new PostgreSqlContainer('postgres:15-alpine').start();
      stops.push(() => container.stop());
      databaseUrl = container.getConnectionUri();
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
    throw new ServiceSetupError(`fenced tests need ${missing.join(' and ')}; no Docker engine was reachable for testcontainers either`);
  }
  // Both settle before either failure counts: a MySQL that fails at once must not leave behind the
  // etcd cluster still starting beside it (its stop is pushed only when it is up).
  const [mysql, etcd] = await Promise.allSettled([options.mysql === true ? resolveMysql(stops) : '', options.etcd === true ? resolveEtcd(stops) : '']);
  if (mysql.status === 'rejected') throw mysql.reason;
  if (etcd.status === 'rejected') throw etcd.reason;
  const mysqlUrl = mysql.value;
  const etcdEndpoints = etcd.value;
  return {
    databaseUrl: databaseUrl!,
    redisUrl: redisUrl!,
    mysqlUrl,
    etcdEndpoints,
    stop: async () => {
      await Promise.all(stops.map((s) => s()));
    },
  };
}
