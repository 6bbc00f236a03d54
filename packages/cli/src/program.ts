import { createServer } from 'node:http';
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import type pg from 'pg';
import { databaseUrl, databaseUrlSource, mysqlUrl, openDatabase, openMysql, openRedis, type ConnectionOptions, type MysqlPoolHandle, type RedisTarget } from './connections.js';
import type { FenceDatabase } from './fence-database.js';
import { CliError, ExitCode } from './exit-codes.js';
import { parseDuration } from './duration.js';
import { formatStatus } from './status/format-status.js';
import { readStatus } from './status/read-status.js';
import { createStatusHandler } from './status/status-handler.js';
import { formatDoctor, runDoctor } from './doctor/run-doctor.js';
import { lowerFence, pruneFires, showFence } from './admin/fence-admin.js';
import { textTable } from './text-table.js';
import { etcdEndpoints, etcdSecurity, openEtcd, type EtcdSecurity, type EtcdSecurityOptions } from './etcd-connection.js';
import type { Etcd3 } from 'etcd3';
import { leaseStoreRow, leaseStores } from './lease-stores.js';

interface GlobalOptions extends ConnectionOptions, EtcdSecurityOptions {
  readonly prefix: string;
  readonly schema: string;
  readonly table: string;
  /** A lease store's kind: a row of lease-stores.ts. */
  readonly leaseStore: string;
  /** etcd's client endpoints, comma-separated (or ETCD_ENDPOINTS), on the etcd lease store. */
  readonly etcd?: string;
  /** The etcd key prefix (`etcdLeases({ prefix })`). */
  readonly etcdPrefix: string;
  readonly json: boolean;
}

/** Where the command writes; a seam so tests of the parser need no subprocess (the CLI tests use one). */
export interface Io {
  out(text: string): void;
  err(text: string): void;
}

const EXIT_CODES_HELP = `
Exit codes:
  0  done; for doctor: no check failed (warnings allowed)
  1  doctor: a check failed; fence show: the resource has no fence
  2  bad usage or input (unknown option, malformed token or URL, a refused admin act); nothing changed
  3  Redis or PostgreSQL could not be reached; nothing changed

Connections: --redis URL (default REDIS_URL, else redis://127.0.0.1:6379), or --cluster host:port,…,
or --sentinels host:port,… with --sentinel-name; --database URL (default DATABASE_URL).`;

/** Where the coordinators' and guards' objects are named: the key prefix, the guard's schema and table. */
/** The status page's default port: beside, not on, the OpenTelemetry Prometheus exporter's 9464. */
const STATUS_PORT = 9470;

/** Whether the command line (or REDIS_URL) names a Redis deployment. */
const redisGiven = (o: GlobalOptions) => o.redis !== undefined || o.cluster !== undefined || o.sentinels !== undefined || Boolean(process.env['REDIS_URL']);

const installationNames = (o: GlobalOptions) => ({ keyPrefix: o.prefix, schema: o.schema, table: o.table });

const positiveInt = (flag: string) => (text: string) => {
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1 || n > 10_000) throw new InvalidArgumentError(`${flag} must be an integer from 1 to 10000`);
  return n;
};
const port = (text: string) => {
  const n = Number(text);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new InvalidArgumentError('must be a port number (0 picks a free one)');
  return n;
};

/** Runs `fenced` with `argv` (as process.argv: node, script, args…); resolves with the exit code. */
export async function main(argv: readonly string[], io: Io = { out: (t) => process.stdout.write(t), err: (t) => process.stderr.write(t) }): Promise<number> {
  const resources: Array<() => Promise<void>> = [];
  let serving: Promise<void> | undefined;

  const connectRedis = async (o: GlobalOptions): Promise<RedisTarget> => {
    const target = await openRedis(o);
    resources.push(async () => target.client.disconnect());
    return target;
  };
  const connectDatabase = async (o: GlobalOptions, required: boolean): Promise<pg.Pool | null> => {
    const url = databaseUrl(o);
    if (url === null) {
      if (required) throw new CliError(ExitCode.USAGE, 'this command needs the database: give --database postgres://… or set DATABASE_URL');
      return null;
    }
    const pool = await openDatabase(url, databaseUrlSource(o));
    resources.push(() => pool.end());
    return pool;
  };
  /** MySQL/MariaDB holding the fences (`--mysql` or MYSQL_URL), or null when none is named. */
  const connectMysql = async (o: GlobalOptions): Promise<MysqlPoolHandle | null> => {
    const url = mysqlUrl(o);
    if (url === null) return null;
    const pool = await openMysql(url, o.mysql === undefined ? 'MYSQL_URL' : '--mysql');
    resources.push(() => pool.end());
    return pool;
  };
  /** The fences' database for the fence and fires commands: MySQL when named, else PostgreSQL (required). */
  const connectFences = async (o: GlobalOptions): Promise<FenceDatabase> => {
    const mysql = await connectMysql(o);
    if (mysql !== null) return { kind: 'mysql', pool: mysql };
    return { kind: 'postgres', pool: (await connectDatabase(o, true))! };
  };
  /** The etcd cluster of the etcd lease store, or null on another store. */
  const connectEtcd = async (o: GlobalOptions): Promise<{ client: Etcd3; endpoints: string[]; prefix: string; security: EtcdSecurity } | null> => {
    if (!leaseStoreRow(o.leaseStore).needs.etcd) return null;
    const named = etcdEndpoints(o.etcd);
    if (named === null) throw new CliError(ExitCode.USAGE, `--lease-store ${o.leaseStore} needs the cluster: give --etcd http://host:port,… or set ETCD_ENDPOINTS`);
    const security = etcdSecurity(o);
    const client = await openEtcd(named.endpoints, named.source, security);
    resources.push(async () => client.close());
    return { client, endpoints: named.endpoints, prefix: o.etcdPrefix, security };
  };
  const print = (o: GlobalOptions, value: unknown, text: () => string) => io.out(`${o.json ? JSON.stringify(value, null, 2) : text()}\n`);

  const program = new Command('fenced')
    .description('Operate fenced: who leads what with which token, whether fires are late or refused, whether the deployment keeps the guarantees.')
    .addOption(new Option('--redis <url>', 'a single Redis server (or set REDIS_URL)'))
    .addOption(new Option('--cluster <nodes>', 'Redis Cluster seed nodes, host:port,host:port'))
    .addOption(new Option('--sentinels <nodes>', 'Redis Sentinels, host:port,host:port'))
    .addOption(new Option('--sentinel-name <name>', 'the primary the sentinels watch').default('mymaster'))
    .addOption(new Option('--database <url>', 'PostgreSQL holding the fences (or set DATABASE_URL)'))
    .addOption(new Option('--mysql <url>', 'MySQL or MariaDB holding the fences instead, mysql://… (or set MYSQL_URL)'))
    .addOption(new Option('--prefix <prefix>', 'the key prefix the coordinators and guards use').default('fenced'))
    .addOption(new Option('--schema <schema>', "the guard's schema").default('public'))
    .addOption(new Option('--table <table>', "the guard's table").default('fenced_fences'))
    .addOption(new Option('--lease-store <store>', 'where the leases live: redis, postgres (postgresLeases, beside the guard\'s table), mysql (mysqlLeases, beside the guard\'s table; with --mysql) or etcd (etcdLeases; with --etcd); Redis is then read only when given').choices([...leaseStores.keys()]).default('redis'))
    .addOption(new Option('--etcd <endpoints>', 'etcd client endpoints, http://host:port,… (or set ETCD_ENDPOINTS), for --lease-store etcd'))
    .addOption(new Option('--etcd-prefix <prefix>', 'the key prefix of etcdLeases').default('fenced/'))
    .addOption(new Option('--etcd-cacert <file>', 'the CA that signed the etcd members’ certificates (PEM; default: the system’s roots)'))
    .addOption(new Option('--etcd-cert <file>', 'a client certificate for etcd (PEM), with --etcd-key'))
    .addOption(new Option('--etcd-key <file>', 'the key of --etcd-cert (PEM)'))
    .addOption(new Option('--etcd-user <name[:password]>', 'an etcd user; the password after the colon or in ETCD_PASSWORD'))
    .option('--json', 'machine-readable output', false)
    .addHelpText('after', EXIT_CODES_HELP)
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride()
    .configureOutput({ writeOut: io.out, writeErr: io.err });

  program
    .command('status')
    .description('per lease: leader, token, time left, counter, last elections, last fire per job and its lateness; per resource: fence, Redis mark, last applied fire, applied-fire count, oldest record, refused writes')
    .option('--lease <names...>', 'only these leases (default: every lease under the prefix)')
    .option('--history <n>', 'elections and refusals shown per lease or resource', positiveInt('--history'), 10)
    .option('--serve', 'serve the status page (and status.json) instead of printing once; stops on Ctrl-C')
    .option('--host <host>', 'address to serve on', '127.0.0.1')
    .option('--port <port>', "port to serve on (0: a free one; the URL is printed); the default is not the Prometheus exporter's 9464", port, STATUS_PORT)
    .option('--refresh <duration>', 'how often the page refreshes itself', '2s')
    .addHelpText('after', EXIT_CODES_HELP)
    .action(async (local: { lease?: string[]; history: number; serve?: boolean; host: string; port: number; refresh: string }, command: Command) => {
      const o = command.optsWithGlobals<GlobalOptions>();
      const needs = leaseStoreRow(o.leaseStore).needs;
      const onPostgres = needs.database;
      const redis = !needs.redis && !redisGiven(o) ? null : await connectRedis(o);
      const etcd = await connectEtcd(o);
      const mysql = await connectMysql(o);
      if (needs.mysql && mysql === null) throw new CliError(ExitCode.USAGE, `--lease-store ${o.leaseStore} needs the database: give --mysql mysql://… or set MYSQL_URL`);
      const pool = mysql === null || onPostgres ? await connectDatabase(o, onPostgres) : null;
      const source = { redis, etcd, pool, mysql, leaseStore: o.leaseStore, ...installationNames(o), history: local.history, ...(local.lease === undefined ? {} : { leases: local.lease }) };
      if (!local.serve) {
        const status = await readStatus(source);
        print(o, status, () => formatStatus(status));
        return;
      }
      const refreshMs = parseDuration('--refresh', local.refresh);
      const server = createServer(createStatusHandler({ ...source, refreshMs }));
      await new Promise<void>((resolve, reject) => server.once('error', reject).listen(local.port, local.host, resolve)).catch((err: unknown) => {
        const code = (err as { code?: unknown }).code;
        // Our own address, not a service that could not be reached: a usage problem, said as one.
        if (code === 'EADDRINUSE') throw new CliError(ExitCode.USAGE, `--port ${local.port}: ${local.host}:${local.port} is in use; give another port (0 picks a free one)`, { cause: err });
        if (code === 'EACCES' || code === 'EADDRNOTAVAIL') throw new CliError(ExitCode.USAGE, `--host ${local.host} --port ${local.port}: cannot serve there (${String(code)})`, { cause: err });
        throw err;
      });
      const address = server.address();
      const url = `http://${local.host.includes(':') ? `[${local.host}]` : local.host}:${typeof address === 'object' && address !== null ? address.port : local.port}/`;
      print(o, { serving: url }, () => `serving the status page at ${url} (Ctrl-C to stop)`);
      serving = new Promise<void>((resolve) => {
        const stop = () => server.close(() => resolve());
        process.once('SIGINT', stop);
        process.once('SIGTERM', stop);
      });
    });

  program
    .command('doctor')
    .description('checks the deployment against what the guarantees need, each with a verdict and the fix; exits 1 when a check fails (a deploy gate)')
    .option('--retention <duration>', 'how long applied-fire records are meant to be kept (the guard\'s appliedFireRetentionMs)', '7d')
    .option('--no-postgres', 'the deployment keeps no fences in PostgreSQL: skip its checks (without a database and without this, doctor fails: a deploy gate must not pass unchecked)')
    .addHelpText('after', EXIT_CODES_HELP)
    .action(async (local: { retention: string; postgres: boolean }, command: Command) => {
      const o = command.optsWithGlobals<GlobalOptions>();
      const retentionMs = parseDuration('--retention', local.retention);
      const needs = leaseStoreRow(o.leaseStore).needs;
      const onPostgres = needs.database;
      if (onPostgres && !local.postgres) throw new CliError(ExitCode.USAGE, `--no-postgres cannot go with --lease-store ${o.leaseStore}: the leases are in the database`);
      const redis = !needs.redis && !redisGiven(o) ? null : await connectRedis(o);
      const etcd = await connectEtcd(o);
      const mysql = await connectMysql(o);
      if (needs.mysql && mysql === null) throw new CliError(ExitCode.USAGE, `--lease-store ${o.leaseStore} needs the database: give --mysql mysql://… or set MYSQL_URL`);
      const pool = local.postgres && (mysql === null || onPostgres) ? await connectDatabase(o, onPostgres) : null;
      const report = await runDoctor({ redis, etcd, pool, mysql, leaseStore: o.leaseStore, postgresSkipped: !local.postgres, ...installationNames(o), retentionMs });
      print(o, report, () => formatDoctor(report));
      if (!report.ok) throw new ExitWith(ExitCode.FAILED);
    });

  const fence = program.command('fence').description('read a fence, or lower it (audited)').addHelpText('after', EXIT_CODES_HELP);
  fence
    .command('show')
    .description('the fence of a resource in PostgreSQL, its Redis mark, and the latest audited lowerings')
    .requiredOption('--resource <name>', 'the resource')
    .option('--history <n>', 'audit entries to show', positiveInt('--history'), 10)
    .option('--no-mark', 'the guard runs without the Redis fast path: do not read a Redis mark (none is read unless a Redis is named)')
    .addHelpText('after', EXIT_CODES_HELP)
    .action(async (local: { resource: string; history: number; mark: boolean }, command: Command) => {
      const o = command.optsWithGlobals<GlobalOptions>();
      const fences = await connectFences(o);
      const redis = local.mark && redisGiven(o) ? await connectRedis(o) : null;
      const shown = await showFence({ fences, redis, ...installationNames(o) }, local.resource, local.history);
      print(o, shown, () =>
        [
          `resource ${shown.resource}: fence ${shown.fence ?? '(none)'}, redis mark ${redis !== null ? (shown.mark ?? '(none)') : local.mark ? '(no Redis named: not read)' : '(not read)'}`,
          ...(shown.audit.length === 0 ? ['no audited lowering'] : ['audited lowerings (newest first):', textTable(['at', 'from', 'to', 'actor', 'reason'], shown.audit.map((a) => [a.at, a.from ?? '-', a.to, a.actor, a.reason]))]),
        ].join('\n'),
      );
      if (shown.fence === null) throw new ExitWith(ExitCode.FAILED);
    });
  fence
    .command('lower')
    .description('lowers a poisoned fence: only downwards, only with an actor and a reason; writes the audit row in the same transaction and resets the Redis mark (of the Redis named, if any); prints before and after')
    // Required, and checked together in the action: an operator hears of every missing one at once.
    .option('--resource <name>', 'the resource (required)')
    .option('--to <token>', 'the new fence, below the current one (required)')
    .option('--actor <who>', 'who does this, kept in the audit table (required)')
    .option('--reason <why>', 'why, kept in the audit table (required)')
    .option('--no-mark', 'the guard runs without the Redis fast path: there is no Redis mark to reset (none is reset unless a Redis is named)')
    .addHelpText('after', EXIT_CODES_HELP)
    .action(async (given: { resource?: string; to?: string; actor?: string; reason?: string; mark: boolean }, command: Command) => {
      const missing = (['resource', 'to', 'actor', 'reason'] as const).filter((name) => given[name] === undefined).map((name) => `--${name}`);
      if (missing.length > 0) throw new CliError(ExitCode.USAGE, `fence lower needs ${missing.join(', ')}: nothing was changed`);
      const local = given as { resource: string; to: string; actor: string; reason: string; mark: boolean };
      const o = command.optsWithGlobals<GlobalOptions>();
      const fences = await connectFences(o);
      // Redis first: if it cannot be reached, nothing is changed (a lowered fence under a mark left
      // above it would keep refusing what the lowering lets through). Only a Redis that was named
      // (--redis, --cluster, --sentinels or REDIS_URL): a deployment without Redis must not get a
      // mark in whatever answers at the default address.
      const redis = local.mark && redisGiven(o) ? await connectRedis(o) : null;
      const result = await lowerFence({ fences, redis, ...installationNames(o) }, local);
      print(o, result, () =>
        [
          `lowered the fence of ${result.resource}`,
          `  before: fence ${result.before.fence ?? '(none)'}, redis mark ${redis === null ? '(no redis)' : (result.before.mark ?? '(none)')}`,
          `  after:  fence ${result.after.fence ?? '(none)'}, redis mark ${redis === null ? '(no redis)' : (result.after.mark ?? '(none)')}`,
          `  audit:  ${result.audit.at} ${result.audit.actor}: ${result.audit.reason}`,
        ].join('\n'),
      );
    });

  const fires = program.command('fires').description('the table of applied fires').addHelpText('after', EXIT_CODES_HELP);
  fires
    .command('prune')
    .description('deletes applied-fire records older than a duration, on every resource (keep it longer than the catch-up window)')
    .requiredOption('--older-than <duration>', 'for example 7d, 12h')
    .addHelpText('after', EXIT_CODES_HELP)
    .action(async (local: { olderThan: string }, command: Command) => {
      const o = command.optsWithGlobals<GlobalOptions>();
      const olderThanMs = parseDuration('--older-than', local.olderThan);
      const fences = await connectFences(o);
      const result = await pruneFires({ fences, ...installationNames(o) }, olderThanMs);
      print(o, result, () => `pruned ${result.deleted} applied-fire record(s) older than ${local.olderThan}`);
    });

  try {
    await program.parseAsync(argv as string[]);
    if (serving !== undefined) await serving;
    return ExitCode.OK;
  } catch (err) {
    if (err instanceof ExitWith) return err.code;
    if (err instanceof CommanderError) {
      // --help and --version end here too, with their own exit code 0.
      return err.exitCode === 0 ? ExitCode.OK : ExitCode.USAGE;
    }
    if (err instanceof CliError) {
      io.err(`fenced: ${err.message}\n`);
      return err.exitCode;
    }
    const code = (err as { code?: unknown }).code;
    if (code === 'GUARD_UNAVAILABLE') {
      io.err(`fenced: the fences' database failed: ${(err as Error).message}\n`);
      return ExitCode.UNREACHABLE;
    }
    io.err(`fenced: ${err instanceof Error ? err.message : String(err)}\n`);
    return ExitCode.UNREACHABLE;
  } finally {
    for (const close of resources.reverse()) await close().catch(() => {});
  }
}

/** Ends a command that finished its output with a non-zero exit code. */
class ExitWith extends Error {
  constructor(readonly code: number) {
    super(`exit ${code}`);
  }
}
