import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, waitForPort } from '../ports.js';
import { expectListening } from '../process/socket-owner.js';

/** A PgBouncer of our own on a loopback port, in front of one PostgreSQL database. */
export interface PgBouncerProcess {
  readonly port: number;
  /** The database through the pooler, as clients connect to it. */
  readonly url: string;
  stop(): Promise<void>;
}

export interface PgBouncerOptions {
  /** The database behind it: `postgres://user@host:port/db` (trust authentication). */
  readonly upstream: string;
  /** `transaction` (where LISTEN does not work) or `session`. @defaultValue `'transaction'` */
  readonly poolMode?: 'transaction' | 'session';
}

const BINARY = '/usr/sbin/pgbouncer';

/** Whether PgBouncer is installed (Debian: apt-get install pgbouncer). */
export function hasPgBouncer(): boolean {
  return existsSync(BINARY);
}

/**
 * Starts PgBouncer (Debian's package) on a free loopback port with a configuration of its own, in
 * front of `upstream`. PgBouncer refuses to run as root: as root, it runs as the `postgres` user.
 */
export async function startPgBouncer(options: PgBouncerOptions): Promise<PgBouncerProcess> {
  if (!hasPgBouncer()) throw new Error(`no ${BINARY}: install pgbouncer (Debian: apt-get install pgbouncer)`);
  const upstream = new URL(options.upstream);
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), `fenced-pgbouncer-${port}-`));
  const user = upstream.username || 'postgres';
  const database = upstream.pathname.slice(1) || 'postgres';
  writeFileSync(join(dir, 'users.txt'), `"${user}" ""\n`);
  writeFileSync(
    join(dir, 'pgbouncer.ini'),
    [
      '[databases]',
      `${database} = host=${upstream.hostname} port=${upstream.port || '5432'} dbname=${database} user=${user}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${join(dir, 'users.txt')}`,
      `pool_mode = ${options.poolMode ?? 'transaction'}`,
      'default_pool_size = 4',
      'max_client_conn = 100',
      // node-postgres sends PGOPTIONS as the `options` startup parameter, which PgBouncer refuses
      // ("unsupported startup parameter") unless told to ignore it: pnpm mutate bounds every
      // statement of a mutant's tests that way, and a client refused here failed every test through it.
      'ignore_startup_parameters = options',
      `logfile = ${join(dir, 'pgbouncer.log')}`,
      '',
    ].join('\n'),
  );
  const asUser = process.getuid?.() === 0 ? { uid: Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' })), gid: Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' })) } : undefined;
  if (asUser !== undefined) chownSync(dir, asUser.uid, asUser.gid);
  for (const file of ['users.txt', 'pgbouncer.ini']) if (asUser !== undefined) chownSync(join(dir, file), asUser.uid, asUser.gid);
  const child: ChildProcess = spawn(BINARY, [join(dir, 'pgbouncer.ini')], { stdio: 'ignore', ...(asUser ?? {}) });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    await waitForPort(port, 10_000);
    // Whoever answers must be this pgbouncer (a port another process took: see expectListening).
    await expectListening(child.pid!, port, 'pgbouncer');
  } catch (error) {
    child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  return {
    port,
    url: `postgres://${user}@127.0.0.1:${port}/${database}`,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGINT');
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
