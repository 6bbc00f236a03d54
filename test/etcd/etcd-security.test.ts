import { readFileSync } from 'node:fs';
import { createTestCertificates, startEtcdCluster, type EtcdCluster, type TestCertificates } from '@fenced/chaos';
import { createCoordinator, type Coordinator } from '@fenced/coordinator';
import { etcdLeases } from '@fenced/coordinator/etcd';
import { isFencedError } from '@fenced/shared';
import { runCli, uniqueEtcdPrefix, waitFor } from '#test-support';
import { Etcd3, type IOptions } from 'etcd3';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

// The etcd lease store against a cluster that checks who calls: TLS with client certificates, and
// etcd's authentication with a role per user (what a production cluster runs). A member of its own,
// started here: a misconfigured client must get a typed error naming the cause (`tls`, `auth`), never
// lead, and write nothing; a leader whose permission is taken away mid-term must end the term by its
// own deadline.

const TTL = 2000;
const prefix = uniqueEtcdPrefix('secure');
const APP_PASSWORD = 'app-password';
const ROOT_PASSWORD = 'root-password';
let certs: TestCertificates;
let cluster: EtcdCluster;
let root: Etcd3;
const stoppers: Array<() => Promise<unknown> | void> = [];
let n = 0;

/** A client of the secure member: TLS settings as given (the right CA and a client certificate by default). */
function client(options: Partial<IOptions> = {}): Etcd3 {
  const c = new Etcd3({
    hosts: [...cluster.endpoints],
    dialTimeout: 2000,
    credentials: { rootCertificate: readFileSync(certs.ca), certChain: readFileSync(certs.client.cert), privateKey: readFileSync(certs.client.key) },
    ...options,
  });
  stoppers.push(() => c.close());
  return c;
}

const asApp = { auth: { username: 'app', password: APP_PASSWORD } };

beforeAll(async () => {
  certs = await createTestCertificates();
  cluster = await startEtcdCluster({ size: 1, clientTls: { certFile: certs.server.cert, keyFile: certs.server.key, trustedCaFile: certs.ca, clientCertAuth: true } });
  // Users and roles as an operator sets them up: `app` may read and write the store's prefix only,
  // `stranger` a prefix of its own; then authentication goes on.
  const setup = client();
  const rootUser = await setup.user('root').create(ROOT_PASSWORD);
  await setup.role('root').create();
  await rootUser.addRole('root');
  for (const [user, password, granted] of [['app', APP_PASSWORD, prefix], ['stranger', 'stranger-password', 'elsewhere/']] as const) {
    const role = await setup.role(user).create();
    await role.grant({ permission: 'Readwrite', range: setup.range({ prefix: granted }) });
    await (await setup.user(user).create(password)).addRole(user);
  }
  await setup.auth.authEnable();
  root = new Etcd3({ hosts: [...cluster.endpoints], credentials: { rootCertificate: readFileSync(certs.ca), certChain: readFileSync(certs.client.cert), privateKey: readFileSync(certs.client.key) }, auth: { username: 'root', password: ROOT_PASSWORD } });
}, 120_000);
afterEach(async () => {
  for (const stop of stoppers.splice(0).reverse()) await stop();
});
afterAll(async () => {
  root?.close();
  await cluster?.stop();
  certs?.remove();
});

/** Every key under the store's prefix, read as root. */
const keysWritten = async () => (await root.getAll().prefix(prefix).keys()).length;

function coordinator(etcd: Etcd3, lease: string): { c: Coordinator; errors: unknown[]; lost: Array<{ reason: string; endedAt: number }> } {
  const c = createCoordinator({ store: etcdLeases({ client: etcd, prefix }), lease, nodeId: `node-${n}`, ttlMs: TTL, renewIntervalMs: 400, acquireRetryMs: 200 });
  const errors: unknown[] = [];
  const lost: Array<{ reason: string; endedAt: number }> = [];
  c.on('error', (err) => errors.push(err));
  c.on('lost', (l) => lost.push(l));
  stoppers.push(() => c.stop());
  return { c, errors, lost };
}

/** The reason of the typed error an acquire failed with, or what it failed with otherwise; and the error. */
async function acquireFailure(etcd: Etcd3): Promise<{ reason: string; error: string }> {
  const error = await etcdLeases({ client: etcd, prefix })
    .openLease(`refused-${++n}`, 'node-a', TTL)
    .acquire(TTL, 5000)
    .then(() => new Error('acquired'))
    .catch((err: unknown) => err);
  return { reason: isFencedError(error, 'LEASE_STORE_UNAVAILABLE') ? error.reason : 'untyped', error: String(error) };
}

describe('the etcd lease store on a cluster with TLS and authentication', () => {
  it('with the cluster’s CA, a client certificate and a user of its own: leads, with a token etcd assigned', async () => {
    const { c } = coordinator(client(asApp), `secure-${++n}`);
    await c.start();
    await waitFor(() => c.isLeader(), 20_000);
    expect(c.token()!).toBeGreaterThan(0n);
    expect(await keysWritten()).toBeGreaterThan(0);
  });

  it('a client that does not trust the server’s CA, trusts another one, or brings no client certificate: a typed tls error, and nothing written', async () => {
    const before = await keysWritten();
    const misconfigured: Array<[string, Partial<IOptions>]> = [
      ['the system’s roots only', { credentials: undefined }],
      ['an unrelated CA', { credentials: { rootCertificate: readFileSync(certs.otherCa), certChain: readFileSync(certs.client.cert), privateKey: readFileSync(certs.client.key) } }],
      ['no client certificate', { credentials: { rootCertificate: readFileSync(certs.ca) } }],
    ];
    for (const [what, options] of misconfigured) {
      const { reason, error } = await acquireFailure(client(options));
      expect(reason, `${what}: ${error}`).toBe('tls');
      // With a user and password configured, etcd3 first authenticates on a gRPC client of its own,
      // whose failure carries no cause ("Last error: null"): still typed, but told as unreachable.
      const withPassword = await acquireFailure(client({ ...asApp, ...options }));
      expect(withPassword.reason, `${what}, with a password: ${withPassword.error}`).toMatch(/^(tls|unreachable)$/);
    }
    expect(await keysWritten()).toBe(before);
  });

  it('a wrong password, or a user without permission on the prefix: a typed auth error, the node never leads, and nothing written', async () => {
    const before = await keysWritten();
    expect(await acquireFailure(client({ auth: { username: 'app', password: 'wrong' } }))).toMatchObject({ reason: 'auth' });
    expect(await acquireFailure(client({ auth: { username: 'stranger', password: 'stranger-password' } }))).toMatchObject({ reason: 'auth' });
    // No user at all: etcd takes the client certificate's common name, which is no user of it.
    expect(await acquireFailure(client())).toMatchObject({ reason: 'auth' });
    const { c, errors } = coordinator(client({ auth: { username: 'stranger', password: 'stranger-password' } }), `stranger-${++n}`);
    let led = false;
    c.on('elected', () => (led = true));
    await c.start();
    await waitFor(() => errors.length >= 3, 20_000);
    expect(led).toBe(false);
    expect(errors.every((err) => isFencedError(err, 'LEASE_STORE_UNAVAILABLE') && err.reason === 'auth'), errors.map(String).join('\n')).toBe(true);
    expect(await keysWritten()).toBe(before);
  });

  it('a leader whose permission is revoked mid-term: its renewals fail as auth and it ends the term by its own deadline', async () => {
    const lease = `revoked-${++n}`;
    const { c, errors, lost } = coordinator(client(asApp), lease);
    await c.start();
    await waitFor(() => c.isLeader(), 20_000);
    const revokedToken = c.token()!;
    const role = root.role('app');
    await role.revoke({ permission: 'Readwrite', range: root.range({ prefix }) });
    const revokedAt = performance.now();
    try {
      await waitFor(() => lost.length > 0, 20_000);
      // A renew sent before the revocation was answered may have extended the term, never beyond a
      // TTL from its send, which was before now.
      expect(lost[0]!.endedAt - revokedAt).toBeLessThanOrEqual(TTL);
      expect(c.isLeader()).toBe(false);
      expect(errors.some((err) => isFencedError(err, 'LEASE_STORE_UNAVAILABLE') && err.reason === 'auth'), errors.map(String).join('\n')).toBe(true);
    } finally {
      await role.grant({ permission: 'Readwrite', range: root.range({ prefix }) });
    }
    // Permission back: it leads again, above the revoked term.
    await waitFor(() => c.isLeader(), 20_000);
    expect(c.token()!).toBeGreaterThan(revokedToken);
  });

  it('a budget that is not a number is refused with a typed error instead of reaching gRPC (which throws where no caller can catch it)', async () => {
    const store = etcdLeases({ client: client(asApp), prefix }).openLease(`nan-${++n}`, 'node-a', TTL);
    const won = await store.acquire(TTL, 5000);
    if (!won.won) throw new Error('not granted');
    const error = await store.release(won.leaseValue, Number.NaN).catch((err: unknown) => err);
    expect(isFencedError(error), String(error)).toBe(true);
    expect(String(error)).toMatch(/finite number of ms/);
    expect(await store.release(won.leaseValue, 5000)).toBe(true);
  });

  it('fenced status and doctor reach it with --etcd-cacert, --etcd-cert, --etcd-key and --etcd-user; without the CA or with a wrong password they exit 3 saying which', async () => {
    const lease = `cli-${++n}`;
    const { c } = coordinator(client(asApp), lease);
    await c.start();
    await waitFor(() => c.isLeader(), 20_000);
    const tls = ['--etcd-cacert', certs.ca, '--etcd-cert', certs.client.cert, '--etcd-key', certs.client.key];
    const base = ['--lease-store', 'etcd', '--etcd', cluster.endpoints.join(','), '--etcd-prefix', prefix];
    const env = { REDIS_URL: undefined, DATABASE_URL: undefined, ETCD_ENDPOINTS: undefined, ETCD_PASSWORD: APP_PASSWORD };
    const status = await runCli(['status', ...base, ...tls, '--etcd-user', 'app', '--json'], env);
    expect(status.code, status.stderr).toBe(0);
    const leases = status.json<{ leases: Array<{ lease: string; leader: { token: string } | null }> }>().leases;
    expect(leases.find((l) => l.lease === lease)?.leader?.token).toBe(String(c.token()));
    const doctor = await runCli(['doctor', ...base, ...tls, '--etcd-user', `app:${APP_PASSWORD}`, '--json'], env);
    const checks = doctor.json<{ checks: Array<{ id: string; verdict: string }> }>().checks;
    expect(checks.find((x) => x.id === 'etcd.members')?.verdict, doctor.stdout).toBe('pass');
    expect(checks.find((x) => x.id === 'etcd.cluster')?.verdict, doctor.stdout).toBe('warn'); // one member: no failure tolerated
    const noCa = await runCli(['status', ...base, '--etcd-user', 'app'], env);
    expect(noCa.code).toBe(3);
    expect(noCa.stderr).toMatch(/TLS failed: check --etcd-cacert/);
    const wrongPassword = await runCli(['status', ...base, ...tls, '--etcd-user', 'app:wrong'], env);
    expect(wrongPassword.code).toBe(3);
    expect(wrongPassword.stderr).toMatch(/etcd refused the user/);
    const halfTls = await runCli(['status', ...base, '--etcd-cert', certs.client.cert], env);
    expect(halfTls.code).toBe(2);
    expect(halfTls.stderr).toMatch(/--etcd-cert and --etcd-key go together/);
  });
});
