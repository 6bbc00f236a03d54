import type { Cluster, Redis } from 'ioredis';
import type { Mysql2PoolLike } from '@fenced/consumer-guard/mysql';
import pg from 'pg';
import { CliError, ExitCode } from './exit-codes.js';

/** Where the services are, as the global options give them. */
export interface ConnectionOptions {
  /** redis://… URL of a single server (default: REDIS_URL, else redis://127.0.0.1:6379). */
  readonly redis?: string;
  /** Cluster seed nodes, host:port,host:port. */
  readonly cluster?: string;
  /** Sentinels, host:port,host:port, with the primary's name in `sentinelName`. */
  readonly sentinels?: string;
  readonly sentinelName: string;
  /** postgres://… URL (default: DATABASE_URL). Without one, the PostgreSQL parts are skipped. */
  readonly database?: string;
  /** mysql://… URL of MySQL or MariaDB holding the fences instead (default: MYSQL_URL). */
  readonly mysql?: string;
}

/** The Redis deployment the command talks to, with what its checks need to know about it. */
export type RedisTarget =
  | { readonly kind: 'single'; readonly client: Redis; readonly url: string }
  | { readonly kind: 'cluster'; readonly client: Cluster; readonly seeds: readonly HostPort[] }
  | { readonly kind: 'sentinel'; readonly client: Redis; readonly sentinels: readonly HostPort[]; readonly name: string };

export interface HostPort {
  readonly host: string;
  readonly port: number;
}

export function parseHostPorts(option: string, text: string): HostPort[] {
  const parsed = text.split(',').map((part) => {
    const match = /^\[?([^\]]+?)\]?:(\d{1,5})$/.exec(part.trim());
    const port = match === null ? NaN : Number(match[2]);
    if (match === null || !(port > 0 && port < 65536)) throw new CliError(ExitCode.USAGE, `--${option}: expected host:port[,host:port…], got ${JSON.stringify(part)}`);
    return { host: match[1]!, port };
  });
  return parsed;
}

// Commands fail fast on a service that does not answer: an operator waits seconds, not minutes.
const REDIS_DEFAULTS = { lazyConnect: true, maxRetriesPerRequest: 1, connectTimeout: 3000, enableOfflineQueue: true } as const;

/** Opens the Redis deployment the options name (one of --redis, --cluster, --sentinels). */
export async function openRedis(options: ConnectionOptions): Promise<RedisTarget> {
  const given = [options.redis, options.cluster, options.sentinels].filter((v) => v !== undefined).length;
  if (given > 1) throw new CliError(ExitCode.USAGE, 'give one of --redis, --cluster, --sentinels');
  const { Cluster, Redis } = await loadIoredis();
  let target: RedisTarget;
  if (options.cluster !== undefined) {
    const seeds = parseHostPorts('cluster', options.cluster);
    const client = new Cluster(seeds, { lazyConnect: true, redisOptions: { connectTimeout: 3000, maxRetriesPerRequest: 1 }, clusterRetryStrategy: () => null });
    target = { kind: 'cluster', client, seeds };
  } else if (options.sentinels !== undefined) {
    const sentinels = parseHostPorts('sentinels', options.sentinels);
    const client = new Redis({ ...REDIS_DEFAULTS, sentinels, name: options.sentinelName, sentinelRetryStrategy: () => null, failoverDetector: true });
    target = { kind: 'sentinel', client, sentinels, name: options.sentinelName };
  } else {
    const url = options.redis ?? (process.env['REDIS_URL'] || 'redis://127.0.0.1:6379');
    if (!/^rediss?:\/\//.test(url)) throw new CliError(ExitCode.USAGE, `--redis: expected a redis:// or rediss:// URL, got ${JSON.stringify(url)}`);
    const client = new Redis(url, { ...REDIS_DEFAULTS, retryStrategy: () => null });
    target = { kind: 'single', client, url };
  }
  target.client.on('error', () => {}); // reported by the command that fails, once
  try {
    await target.client.connect();
    // A cluster client is ready once it has the slots; a plain one once the server answers.
    await target.client.ping();
  } catch (cause) {
    target.client.disconnect();
    throw new CliError(ExitCode.UNREACHABLE, `Redis did not answer (${describeRedis(target)}): ${(cause as Error).message}`, { cause });
  }
  return target;
}

/**
 * ioredis, an optional peer: loaded only when a command is pointed at Redis, so a deployment without
 * Redis installs and runs the command line without it.
 */
export async function loadIoredis(): Promise<{ Redis: typeof Redis; Cluster: typeof Cluster }> {
  const ioredis = await import('ioredis').catch((cause: unknown) => {
    throw new CliError(ExitCode.USAGE, 'Redis was named, but the ioredis package is not installed beside @fenced/cli (npm install ioredis)', { cause });
  });
  return { Redis: ioredis.Redis, Cluster: ioredis.Cluster };
}

export function describeRedis(target: RedisTarget): string {
  if (target.kind === 'single') return target.url.replace(/\/\/[^@/]*@/, '//***@');
  if (target.kind === 'cluster') return `cluster ${target.seeds.map((s) => `${s.host}:${s.port}`).join(',')}`;
  return `sentinel ${target.name} via ${target.sentinels.map((s) => `${s.host}:${s.port}`).join(',')}`;
}

/** The database URL from the options or DATABASE_URL, or null when neither names one. */
export function databaseUrl(options: ConnectionOptions): string | null {
  // An empty variable counts as unset, as shells and .env files leave them.
  return options.database ?? (process.env['DATABASE_URL'] || null);
}

/** Where the database URL came from, as an error message names it. */
export function databaseUrlSource(options: ConnectionOptions): string {
  return options.database === undefined ? 'DATABASE_URL' : '--database';
}

// SQLSTATEs that mean the URL itself is wrong, not that the server is down.
const INVALID_CATALOG_NAME = '3D000';
const AUTHORIZATION_CLASS = '28';

/** Opens a small pool on the database and proves it answers; `source` names where the URL came from. */
export async function openDatabase(url: string, source = '--database'): Promise<pg.Pool> {
  if (!/^postgres(ql)?:\/\//.test(url)) throw new CliError(ExitCode.USAGE, `${source}: expected a postgres:// URL, got ${JSON.stringify(url.replace(/\/\/[^@/]*@/, '//***@'))}`);
  const pool = new pg.Pool({ connectionString: url, max: 2, connectionTimeoutMillis: 3000 });
  pool.on('error', () => {});
  try {
    await pool.query('SELECT 1');
  } catch (cause) {
    await pool.end().catch(() => {});
    const state = (cause as { code?: unknown }).code;
    if (state === INVALID_CATALOG_NAME || (typeof state === 'string' && state.startsWith(AUTHORIZATION_CLASS))) {
      // The server answered: the URL names a database or a user it refuses.
      throw new CliError(ExitCode.USAGE, `${source}: PostgreSQL refused it: ${(cause as Error).message}`, { cause });
    }
    throw new CliError(ExitCode.UNREACHABLE, `PostgreSQL did not answer (${source}): ${(cause as Error).message}`, { cause });
  }
  return pool;
}

/** Every primary of the deployment (one for a single server or Sentinel). */
export function primaries(target: RedisTarget): Array<Redis> {
  return target.kind === 'cluster' ? target.client.nodes('master') : [target.client];
}

/** Every key matching `pattern` on every primary (SCAN, never KEYS). */
export async function scanKeys(target: RedisTarget, pattern: string): Promise<string[]> {
  const found = new Set<string>();
  for (const node of primaries(target)) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      cursor = next;
      for (const key of keys) found.add(key);
    } while (cursor !== '0');
  }
  return [...found].sort();
}

/** The MySQL URL from the options or MYSQL_URL, or null when neither names one. */
export function mysqlUrl(options: ConnectionOptions): string | null {
  return options.mysql ?? (process.env['MYSQL_URL'] || null);
}

/**
 * A mysql2 promise pool, as far as the CLI uses one (typed structurally: mysql2 is an optional peer,
 * and these declarations must type-check in a project without it).
 */
export interface MysqlPoolHandle extends Mysql2PoolLike {
  end(): Promise<void>;
}

// MySQL error numbers that mean the URL itself is wrong, not that the server is down.
const ER_BAD_DB_ERROR = 1049;
const ER_ACCESS_DENIED = new Set([1044, 1045, 1698]);

/** Opens a small mysql2 pool and proves it answers; `source` names where the URL came from. */
export async function openMysql(url: string, source = '--mysql'): Promise<MysqlPoolHandle> {
  if (!/^mysql:\/\//.test(url)) throw new CliError(ExitCode.USAGE, `${source}: expected a mysql:// URL, got ${JSON.stringify(url.replace(/\/\/[^@/]*@/, '//***@'))}`);
  // mysql2 is an optional peer: loaded only when an operator points the CLI at MySQL.
  const mysql = await import('mysql2/promise').catch((cause: unknown) => {
    throw new CliError(ExitCode.USAGE, `${source}: the mysql2 package is not installed beside @fenced/cli (npm install mysql2)`, { cause });
  });
  const pool = mysql.createPool({ uri: url, connectionLimit: 2, connectTimeout: 3000 });
  try {
    await pool.query('SELECT 1');
  } catch (cause) {
    await pool.end().catch(() => {});
    const errno = (cause as { errno?: unknown }).errno;
    if (errno === ER_BAD_DB_ERROR || (typeof errno === 'number' && ER_ACCESS_DENIED.has(errno))) {
      throw new CliError(ExitCode.USAGE, `${source}: MySQL refused it: ${(cause as Error).message}`, { cause });
    }
    throw new CliError(ExitCode.UNREACHABLE, `MySQL did not answer (${source}): ${(cause as Error).message}`, { cause });
  }
  return pool;
}
