import { readFileSync } from 'node:fs';
import type { Etcd3, IOptions } from 'etcd3';
import { CliError, ExitCode } from './exit-codes.js';

/** etcd's endpoints from `--etcd` or ETCD_ENDPOINTS (comma-separated http(s):// URLs), or null. */
export function etcdEndpoints(option: string | undefined): { endpoints: string[]; source: string } | null {
  const text = option ?? process.env['ETCD_ENDPOINTS'];
  if (text === undefined || text === '') return null;
  const source = option === undefined ? 'ETCD_ENDPOINTS' : '--etcd';
  const endpoints = text.split(',').map((e) => e.trim());
  for (const e of endpoints) if (!/^https?:\/\/[^/\s]+\/?$/.test(e)) throw new CliError(ExitCode.USAGE, `${source}: expected http(s)://host:port,…, got ${JSON.stringify(e)}`);
  return { endpoints, source };
}

/** The options that say who this client is: TLS (a CA, a client certificate) and an etcd user. */
export type EtcdSecurity = Pick<IOptions, 'credentials' | 'auth'>;

/** The command line's TLS and user options, as etcdctl names them (`--cacert`, `--cert`, `--key`, `--user`). */
export interface EtcdSecurityOptions {
  readonly etcdCacert?: string;
  readonly etcdCert?: string;
  readonly etcdKey?: string;
  readonly etcdUser?: string;
}

/**
 * The client's TLS and user from the options: each file read now (a missing one is a usage error,
 * before any connection), the password after the user's colon or from ETCD_PASSWORD (so that it
 * need not show in the process list).
 */
export function etcdSecurity(o: EtcdSecurityOptions): EtcdSecurity {
  const read = (option: string, path: string) => {
    try {
      return readFileSync(path);
    } catch (cause) {
      throw new CliError(ExitCode.USAGE, `${option}: cannot read ${JSON.stringify(path)}: ${(cause as Error).message}`, { cause });
    }
  };
  if ((o.etcdCert === undefined) !== (o.etcdKey === undefined)) throw new CliError(ExitCode.USAGE, '--etcd-cert and --etcd-key go together: a client certificate needs its key');
  const security: { credentials?: IOptions['credentials']; auth?: IOptions['auth'] } = {};
  if (o.etcdCacert !== undefined || o.etcdCert !== undefined) {
    security.credentials = {
      // Without --etcd-cacert the system's roots are trusted, as etcdctl does.
      rootCertificate: o.etcdCacert === undefined ? (undefined as unknown as Buffer) : read('--etcd-cacert', o.etcdCacert),
      ...(o.etcdCert === undefined ? {} : { certChain: read('--etcd-cert', o.etcdCert), privateKey: read('--etcd-key', o.etcdKey!) }),
    };
  }
  if (o.etcdUser !== undefined) {
    const colon = o.etcdUser.indexOf(':');
    const username = colon < 0 ? o.etcdUser : o.etcdUser.slice(0, colon);
    const password = colon < 0 ? process.env['ETCD_PASSWORD'] : o.etcdUser.slice(colon + 1);
    if (username === '') throw new CliError(ExitCode.USAGE, '--etcd-user: expected name[:password]');
    if (password === undefined) throw new CliError(ExitCode.USAGE, `--etcd-user ${username}: give the password after a colon or set ETCD_PASSWORD`);
    security.auth = { username, password };
  }
  return security;
}

/** A client of `hosts` with the given TLS and user; etcd3 is loaded only when a command needs it. */
export async function etcdClient(hosts: readonly string[], security: EtcdSecurity, dialTimeout: number): Promise<Etcd3> {
  // etcd3 is an optional peer: loaded only when an operator points the CLI at etcd.
  const { Etcd3 } = await import('etcd3').catch((cause: unknown) => {
    throw new CliError(ExitCode.USAGE, `--lease-store etcd: the etcd3 package is not installed beside @fenced/cli (npm install etcd3)`, { cause });
  });
  return new Etcd3({ hosts: [...hosts], dialTimeout, ...security });
}

/** What to check when etcd refused this client, by the reason the lease store gives its errors. */
const HINTS: Record<string, string> = {
  tls: 'TLS failed: check --etcd-cacert (the CA that signed the members’ certificates) and, if the members check client certificates, --etcd-cert and --etcd-key',
  auth: 'etcd refused the user: check --etcd-user and ETCD_PASSWORD, and that its role may read the prefix',
};

/** A member's status within 5 s: the probe every command starts with (etcd asks no user for it). */
async function probe(client: Etcd3): Promise<unknown> {
  try {
    await client.maintenance.status({ deadline: Date.now() + 5000 });
    return null;
  } catch (error) {
    return error;
  }
}

/** A client of the cluster that proved it answers (a member's status), or exit code 3 saying why. */
export async function openEtcd(endpoints: readonly string[], source: string, security: EtcdSecurity): Promise<Etcd3> {
  const client = await etcdClient(endpoints, security, 3000);
  let error = await probe(client);
  if (error === null) return client;
  client.close();
  const { etcdFailure } = await import('@fenced/coordinator/etcd');
  // With a user, etcd3 authenticates first on a gRPC client of its own, whose failure carries no
  // cause: the same probe without the user tells a TLS mistake from a cluster that is down.
  if (security.auth !== undefined && etcdFailure(error) === 'unreachable') {
    const bare = await etcdClient(endpoints, { ...(security.credentials === undefined ? {} : { credentials: security.credentials }) }, 3000);
    const without = await probe(bare);
    bare.close();
    if (without !== null) error = without;
  }
  const hint = HINTS[etcdFailure(error)];
  throw new CliError(ExitCode.UNREACHABLE, `etcd did not answer (${source})${hint === undefined ? '' : `: ${hint}`}: ${(error as Error).message}`, { cause: error });
}
