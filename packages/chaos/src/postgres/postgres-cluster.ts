import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { startFaultProxy, type FaultProxy } from '../fault-proxy.js';
import { postgresBinDir, startPostgresServer, type PostgresServerProcess } from './postgres-server.js';

/** One value from one statement on the server at `port`, by psql (the toolkit does not depend on a driver). */
async function sql(port: number, statement: string): Promise<string> {
  const { stdout } = await promisify(execFile)(join(postgresBinDir(), 'psql'), ['-XAtq', '-h', '127.0.0.1', '-p', String(port), '-U', 'postgres', '-d', 'postgres', '-c', statement], { timeout: 10_000 });
  return stdout.trim();
}

/**
 * A PostgreSQL primary and its streaming replica (asynchronous), behind stable loopback addresses:
 * - the service address, what applications connect to (a DNS name or a virtual IP in production),
 *   moved to the new primary by a failover; connections open at that moment stay where they are, as
 *   pooled TCP connections do;
 * - one address per member slot, for what must reach each server directly (the lease store's primary
 *   confirmation); a slot keeps its address when its server is replaced.
 *
 * `failover()` is what a failover manager does when the primary stops answering: promote the replica,
 * move the service address. The old primary, when it comes back, still believes it is the primary.
 * `rebuild()` is what an operator does after: the deposed server is shut down and a new replica of the
 * new primary takes its slot.
 */
export interface PostgresCluster {
  /** The service address's URL (the `postgres` database). */
  readonly url: string;
  /** Its port, to put a replica's fault proxy in front of. */
  readonly port: number;
  /** One URL per member slot, reaching that server directly. */
  readonly memberUrls: readonly string[];
  /** The server that is the primary now (the deposed one until `failover()` returns, then the promoted one). */
  primary(): PostgresServerProcess;
  /** The replica (undefined between a failover and the rebuild). */
  standby(): PostgresServerProcess | undefined;
  /** Until the replica has replayed everything the primary wrote so far, or `timeoutMs` passed. */
  replicated(timeoutMs: number): Promise<boolean>;
  /** Promotes the replica and moves the service address to it (open connections stay). Returns the deposed primary. */
  failover(): Promise<PostgresServerProcess>;
  /** Shuts the deposed primary down and starts a new replica of the primary in its slot. */
  rebuild(deposed: PostgresServerProcess): Promise<void>;
  stop(): Promise<void>;
}

export async function startPostgresCluster(): Promise<PostgresCluster> {
  const started: PostgresServerProcess[] = [];
  const proxies: FaultProxy[] = [];
  try {
    let primary = await startPostgresServer();
    started.push(primary);
    let standby: PostgresServerProcess | undefined = await startPostgresServer({ replicaOf: primary });
    started.push(standby);
    const service = await startFaultProxy(primary.port);
    proxies.push(service);
    const slots = [await startFaultProxy(primary.port), await startFaultProxy(standby.port)];
    proxies.push(...slots);
    /** Which slot each server sits in. */
    const slotOf = new Map<PostgresServerProcess, FaultProxy>([
      [primary, slots[0]!],
      [standby, slots[1]!],
    ]);
    const urlOf = (port: number) => `postgres://postgres@127.0.0.1:${port}/postgres`;
    const cluster: PostgresCluster = {
      url: urlOf(service.port),
      port: service.port,
      memberUrls: slots.map((s) => urlOf(s.port)),
      primary: () => primary,
      standby: () => standby,
      async replicated(timeoutMs) {
        const replica = standby;
        if (replica === undefined) return false;
        const lsn = await sql(primary.port, 'SELECT pg_current_wal_lsn()');
        const deadline = Date.now() + timeoutMs;
        while (Date.now() < deadline) {
          if ((await sql(replica.port, `SELECT pg_last_wal_replay_lsn() >= '${lsn}'::pg_lsn`)) === 't') return true;
          await new Promise((r) => setTimeout(r, 20));
        }
        return false;
      },
      async failover() {
        const replica = standby;
        if (replica === undefined) throw new Error('no replica to promote: rebuild() after the last failover first');
        const deposed = primary;
        await replica.promote();
        primary = replica;
        standby = undefined;
        service.retarget(replica.port, { reset: false });
        return deposed;
      },
      async rebuild(deposed) {
        const slot = slotOf.get(deposed)!;
        await deposed.stop();
        slotOf.delete(deposed);
        const replica = await startPostgresServer({ replicaOf: primary });
        started.push(replica);
        standby = replica;
        slotOf.set(replica, slot);
        slot.retarget(replica.port);
      },
      async stop() {
        await Promise.all(proxies.map((p) => p.close()));
        await Promise.all(started.map((s) => s.stop()));
      },
    };
    return cluster;
  } catch (err) {
    await Promise.all(proxies.map((p) => p.close()));
    await Promise.all(started.map((s) => s.stop()));
    throw err;
  }
}
