import type { Etcd3 } from 'etcd3';
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

/** A client of the cluster that proved it answers (a member's status), or exit code 3. */
export async function openEtcd(endpoints: readonly string[], source: string): Promise<Etcd3> {
  // A dependency of the etcd lease store only: loaded when a command needs it.
  const { Etcd3 } = await import('etcd3');
  const client = new Etcd3({ hosts: [...endpoints], dialTimeout: 3000 });
  try {
    await client.maintenance.status({ deadline: Date.now() + 5000 });
  } catch (cause) {
    client.close();
    throw new CliError(ExitCode.UNREACHABLE, `etcd did not answer (${source}): ${(cause as Error).message}`, { cause });
  }
  return client;
}
