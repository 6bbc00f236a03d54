import { circuitBreaker, ConsecutiveBreaker, handleAll } from 'cockatiel';
import { randomBytes } from 'node:crypto';
import { Etcd3 } from 'etcd3';
import { afterAll, afterEach, beforeAll, inject } from 'vitest';

/**
 * The etcd cluster of this run: `ETCD_ENDPOINTS`, or the private three-member cluster the global
 * setup started for the unit project (test/support/services.ts).
 */
export function testEtcdEndpoints(): string[] {
  const endpoints = inject('etcdEndpoints');
  if (endpoints === '') throw new Error('no etcd for this project: set ETCD_ENDPOINTS, or install etcd-server so the unit project can start a cluster');
  return endpoints.split(',');
}

/** A client of the run's cluster (or of `hosts`); the caller closes it. */
export function createEtcdClient(hosts: readonly string[] = testEtcdEndpoints(), options: { fastBreaker?: boolean } = {}): Etcd3 {
  return new Etcd3({
    hosts: [...hosts],
    dialTimeout: 2000,
    // What the coordinator README advises for clusters that lose members: etcd3's default breaker
    // keeps a host out for 5 s after three failures, and during an etcd election every host fails.
    ...(options.fastBreaker === true ? { faultHandling: { host: () => circuitBreaker(handleAll, { halfOpenAfter: 500, breaker: new ConsecutiveBreaker(3) }) } } : {}),
  });
}

/** A key prefix of its own for one test or file: nothing of another run is seen or touched. */
export function uniqueEtcdPrefix(name = 't'): string {
  return `fenced-test/${name}-${process.pid}-${randomBytes(4).toString('hex')}/`;
}

/**
 * One test file's etcd: a key prefix of its own (deleted after the file), an admin client, and
 * `client()`s that are closed after each test, with whatever else the test pushed to `stoppers`
 * (stopped in reverse order).
 */
export function etcdTestScope(name: string): { readonly prefix: string; readonly stoppers: Array<() => Promise<unknown> | void>; admin(): Etcd3; client(hosts?: string[]): Etcd3 } {
  const prefix = uniqueEtcdPrefix(name);
  const stoppers: Array<() => Promise<unknown> | void> = [];
  let admin: Etcd3 | undefined;
  beforeAll(() => {
    admin = createEtcdClient();
  });
  afterEach(async () => {
    for (const stop of stoppers.splice(0).reverse()) await stop();
  });
  afterAll(async () => {
    await deleteEtcdPrefix(admin!, prefix);
    admin!.close();
  });
  return {
    prefix,
    stoppers,
    admin: () => admin!,
    client(hosts) {
      const c = createEtcdClient(hosts);
      stoppers.push(() => c.close());
      return c;
    },
  };
}

/** Deletes every key under `prefix` (a test's cleanup). */
export async function deleteEtcdPrefix(client: Etcd3, prefix: string): Promise<void> {
  await client.delete().prefix(prefix);
}

/** A client whose keep-alive requests are counted (each one written to etcd); closed through `stoppers`. */
export function countingEtcdClient(stoppers: Array<() => unknown>): { client: Etcd3; keepAlives: () => number; kvRequests: () => number } {
  const client = createEtcdClient();
  stoppers.push(() => client.close());
  let sent = 0;
  const leaseClient = client.leaseClient;
  const original = leaseClient.leaseKeepAlive.bind(leaseClient);
  leaseClient.leaseKeepAlive = async (options) => {
    const stream = await original(options);
    const write = stream.write.bind(stream);
    stream.write = ((request: unknown) => {
      sent++;
      return write(request as never);
    }) as typeof stream.write;
    return stream;
  };
  // Every key-value request (reads, transactions), counted where the client sends them.
  let kvSent = 0;
  const kv = client.kv;
  for (const method of ['range', 'txn', 'put', 'deleteRange'] as const) {
    const send = (kv[method] as (...args: unknown[]) => unknown).bind(kv);
    (kv as unknown as Record<string, unknown>)[method] = (...args: unknown[]) => (kvSent++, send(...args));
  }
  return { client, keepAlives: () => sent, kvRequests: () => kvSent };
}
