/**
 * What each SQL fence store (PostgreSQL, MySQL) promises beyond the conformance suite every store
 * passes, asked of both the same way (written for StrykerJS's survivors on postgres-store.ts and
 * mysql-store.ts): what a write inside the caller's transaction records and reports, the phase each
 * failure names, the lease refusal's message, errors of the store's own codes raised by the caller's
 * SQL where they cannot be the check's, the check's shape after a lowering, the configuration it
 * refuses by name, and each operation outside the write path failing by name on a server that cannot
 * be reached.
 */
import type { TransactionExecutor } from '@fenced/consumer-guard';
import type { LeaseBackend } from '@fenced/coordinator';
import { isFencedError, type FencedEvent, type FencedLogger, type Token } from '@fenced/shared';
import { caught } from '#test-support';
import { describe, expect, it, onTestFinished } from 'vitest';
import { acquireUntilWon } from '../lease-checked/conformance.js';

type LeaseStore = ReturnType<LeaseBackend['openLease']>;

/** The guard calls these tests make, as both SQL stores' guards answer them. */
export interface SqlStoreGuard {
  guardedWrite<T>(token: bigint, fn: (trx: never) => Promise<T>): Promise<T>;
  guardedWriteIn<T>(tx: unknown, token: bigint, fn: () => Promise<T>, options?: { fireId?: string; issuer?: string; recordOutcome?: (result: T) => string }): Promise<T>;
  appliedOutcome(fireId: string): Promise<{ token: Token; outcome: string | null; appliedAt: Date } | null>;
  highest(): Promise<Token | null>;
  advance(token: bigint): Promise<void>;
  lowerFence(request: { token: bigint; actor: string; reason: string }): Promise<Token | null>;
}

/** The operations outside the write path, as both SQL stores' guards answer them. */
export interface SqlStoreAdmin {
  lowerFence(request: { token: bigint; actor: string; reason: string }): Promise<Token | null>;
  pruneAppliedFires(olderThanMs: number): Promise<number>;
  lastAppliedFire(): Promise<unknown>;
  lastAppliedFires(since: Date): Promise<unknown>;
  appliedFireIds(fireIds: readonly string[]): Promise<ReadonlySet<string>>;
  inspect(): Promise<unknown>;
  auditLog(resource?: string): Promise<unknown>;
}

/** A transaction the test holds, handed to the guard as the caller's executor, every statement kept. */
export interface CallerTransaction {
  readonly tx: TransactionExecutor;
  readonly sent: ReadonlyArray<{ readonly text: string; readonly values: readonly unknown[] | undefined }>;
  end(how: 'commit' | 'rollback'): Promise<void>;
}

export interface SqlStoreHarness {
  /** 'PostgreSQL' or 'MySQL', as the store names itself in its errors. */
  readonly database: 'PostgreSQL' | 'MySQL';
  /** The component its configuration errors name. */
  readonly component: string;
  /** A guard on `resource`, over the migrated database or over one where nothing was migrated. */
  guard(resource: string, settings: { migrated: boolean; checkLease?: string | ((resource: string) => string); logger?: FencedLogger }): SqlStoreGuard;
  /** A transaction opened on the migrated database, or on the one never migrated. */
  begin(migrated: boolean): Promise<CallerTransaction>;
  /** The database's pool, as a caller might wrongly pass it for a transaction. */
  pool(): unknown;
  /** A statement for fn that fails with the store's own refusal code for `refusal`, raised by the caller's SQL. */
  raiseOwn(trx: never, refusal: 'lease not held' | 'duplicate fire'): Promise<unknown>;
  /** That error's code, as the driver reports it. */
  ownCode(refusal: 'lease not held' | 'duplicate fire'): Record<string, unknown>;
  /** The lease store the lease-checked writes check, for `lease`. */
  openLease(lease: string): LeaseStore;
  /** A guard on `resource` over a pool of the store's driver whose server nothing listens for, reporting to `logger`; `close` ends that pool. */
  unreachable(resource: string, logger: FencedLogger): { readonly guard: SqlStoreAdmin; close(): Promise<void> };
  /** The two configurations the store refuses before a statement is sent, and the issue each names. */
  readonly refusedConfigurations: ReadonlyArray<{ readonly make: () => unknown; readonly path: string; readonly message: RegExp }>;
}

/** The check's third argument, from the statements of a caller's transaction: whether the write may raise the fence. */
const raisesArgument = (t: CallerTransaction) => t.sent.find((s) => /_check[`"]?\(/.test(s.text))?.values?.[2];

export function describeSqlStorePromises(name: string, harness: SqlStoreHarness): void {
  let n = 0;
  const nextResource = () => `sqlstore-${name}-${++n}`;
  const { database } = harness;

  describe(`the ${database} fence store on a server that cannot be reached (nothing listens on its port)`, () => {
    // Each failure is reported (`guard.unavailable`) for the resource it concerns: the guard's own,
    // or the one an audit read asked for.
    const own = 'own';
    it.each([
      ['lower fence', own, (g: SqlStoreAdmin) => g.lowerFence({ token: 1n, actor: 'ops', reason: 'a test' })],
      ['prune applied fires', own, (g: SqlStoreAdmin) => g.pruneAppliedFires(60_000)],
      ['read applied fires', own, (g: SqlStoreAdmin) => g.lastAppliedFire()],
      ['read applied fires', own, (g: SqlStoreAdmin) => g.lastAppliedFires(new Date(0))],
      ['read applied fires', own, (g: SqlStoreAdmin) => g.appliedFireIds(['job@20261207T000000.000Z'])],
      ['inspect', own, (g: SqlStoreAdmin) => g.inspect()],
      ['read audit', own, (g: SqlStoreAdmin) => g.auditLog()],
      ['read audit', 'audited-elsewhere', (g: SqlStoreAdmin) => g.auditLog('audited-elsewhere')],
    ])('an operation outside the write path fails typed, naming it (%s), the connect error its cause, reported for its resource (%s)', async (operation, concerns, call) => {
      const resource = nextResource();
      const events: FencedEvent[] = [];
      const { guard, close } = harness.unreachable(resource, (e) => void events.push(e));
      onTestFinished(close);
      const err = await caught(call(guard));
      expect(isFencedError(err, 'GUARD_UNAVAILABLE'), `got ${String(err)}`).toBe(true);
      expect(String((err as Error).message)).toMatch(new RegExp(`^${database} guard failed during ${operation}; nothing was applied: .*ECONNREFUSED`));
      expect((err as Error).cause).toBeInstanceOf(Error);
      expect(events.filter((e) => e.type === 'guard.unavailable').map((e) => e.type === 'guard.unavailable' && e.resource)).toEqual([concerns === own ? resource : concerns]);
    });
  });

  describe(`the ${database} fence store's own promises`, () => {
    it("records a fire's outcome beside its claim inside the caller's transaction, and reports the write accepted", async () => {
      const resource = nextResource();
      const events: FencedEvent[] = [];
      const guard = harness.guard(resource, { migrated: true, logger: (e) => void events.push(e) });
      const t = await harness.begin(true);
      const result = await guard.guardedWriteIn(t.tx, 4n, async () => ({ invoice: 17 }), { fireId: `${resource}-fire-1`, recordOutcome: (r) => JSON.stringify(r) });
      await t.end('commit');
      expect(result).toEqual({ invoice: 17 });
      const outcome = await guard.appliedOutcome(`${resource}-fire-1`);
      expect(outcome).toMatchObject({ token: 4n, outcome: '{"invoice":17}' });
      expect(Math.abs(outcome!.appliedAt.getTime() - Date.now())).toBeLessThan(60_000);
      expect(events).toContainEqual({ type: 'token.accepted', resource, token: 4n });
      // Without recordOutcome, the claim is there and its outcome is none.
      const u = await harness.begin(true);
      await guard.guardedWriteIn(u.tx, 4n, async () => 'x', { fireId: `${resource}-fire-2` });
      await u.end('commit');
      expect(await guard.appliedOutcome(`${resource}-fire-2`)).toMatchObject({ token: 4n, outcome: null });
    });

    it("a write inside the caller's transaction on a store never migrated fails typed, naming the store, and leaves the transaction usable; a pool is refused", async () => {
      const events: FencedEvent[] = [];
      const guard = harness.guard(nextResource(), { migrated: false, logger: (e) => void events.push(e) });
      const t = await harness.begin(false);
      const err = await caught(guard.guardedWriteIn(t.tx, 1n, async () => 'never'));
      expect(isFencedError(err, 'GUARD_UNAVAILABLE'), String(err)).toBe(true);
      expect((err as Error).message).toMatch(new RegExp(`^${database} guard failed during open; nothing was applied: .*\\(was guard\\.migrate\\(\\) run\\?\\)$`));
      expect(events.filter((e) => e.type === 'guard.unavailable')).toHaveLength(1);
      // The savepoint took the failure: the caller's transaction still runs statements.
      expect((await t.tx.executeSql('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
      await t.end('rollback');
      const pooled = await caught(guard.guardedWriteIn(harness.pool(), 1n, async () => 'never'));
      expect(pooled).toBeInstanceOf(TypeError);
      expect((pooled as Error).message).toBe(`guardedWriteIn: tx is a pool, not a transaction: pass the connection the transaction is open on (${database} fence store)`);
    });

    it('names the phase of each read that failed, with nothing applied', async () => {
      const guard = harness.guard(nextResource(), { migrated: false });
      const phases: Array<[string, () => Promise<unknown>]> = [
        ['query', () => guard.highest()],
        ['advance', () => guard.advance(3n)],
        ['read applied fires', () => guard.appliedOutcome('fire-x')],
      ];
      for (const [phase, call] of phases) {
        const err = await caught(call());
        expect(isFencedError(err, 'GUARD_UNAVAILABLE'), String(err)).toBe(true);
        expect((err as Error).message).toMatch(new RegExp(`^${database} guard failed during ${phase}; nothing was applied: `));
      }
    });

    it("refuses a lease-checked write naming the lease's token now, or none when the lease was never granted", async () => {
      const lease = `${nextResource()}-lease`;
      const events: FencedEvent[] = [];
      const guard = harness.guard(nextResource(), { migrated: true, checkLease: lease, logger: (e) => void events.push(e) });
      const never = await caught(guard.guardedWrite(1n, async () => 'never'));
      expect(isFencedError(never, 'NOT_LEADER'), String(never)).toBe(true);
      expect((never as Error).message).toBe(`not the leader of "${lease}": token 1 no longer holds lease "${lease}" (its token is none): the write was refused in its own transaction`);
      const store = harness.openLease(lease);
      const reply = await acquireUntilWon(store, 10_000, 5_000, 20_000);
      if (!reply.won) throw new Error('not granted');
      try {
        const stale = reply.token - 1n;
        const err = await caught(guard.guardedWrite(stale, async () => 'never'));
        expect(isFencedError(err, 'NOT_LEADER'), String(err)).toBe(true);
        expect((err as Error).message).toBe(`not the leader of "${lease}": token ${stale} no longer holds lease "${lease}" (its token is ${reply.token}): the write was refused in its own transaction`);
        expect(await guard.guardedWrite(reply.token, async () => 'held')).toBe('held');
        // Inside the caller's transaction, a write that names the node its token was issued to is
        // checked against the holder too: the lease's token, issued to another node, is refused.
        const t = await harness.begin(true);
        const otherNode = await caught(guard.guardedWriteIn(t.tx, reply.token, async () => 'never', { issuer: 'node-b' }));
        expect(isFencedError(otherNode, 'NOT_LEADER'), String(otherNode)).toBe(true);
        expect(await guard.guardedWriteIn(t.tx, reply.token, async () => 'held', { issuer: 'node-a' })).toBe('held');
        await t.end('commit');
      } finally {
        await store.release(reply.leaseValue, 5_000);
      }
    });

    it("passes on untouched an error of the store's own codes raised by the caller's SQL where it cannot be the check's", async () => {
      // No lease is checked, so 'lease not held' is not the check's; no fire is claimed, so 'duplicate fire' is not either.
      const guard = harness.guard(nextResource(), { migrated: true });
      for (const refusal of ['lease not held', 'duplicate fire'] as const) {
        const err = await caught(guard.guardedWrite(1n, (trx) => harness.raiseOwn(trx, refusal)));
        expect(isFencedError(err), String(err)).toBe(false);
        expect(err).toMatchObject(harness.ownCode(refusal));
      }
    });

    it('after lowering a fence, asks the next write above the lowered fence to raise it, and a write at the fence it saw to share the row', async () => {
      const guard = harness.guard(nextResource(), { migrated: true });
      await guard.guardedWrite(10n, async () => 'ten');
      expect(await guard.lowerFence({ token: 5n, reason: 'test: lowered by hand', actor: 'sqlstore-test' })).toBe(10n);
      const t = await harness.begin(true);
      await guard.guardedWriteIn(t.tx, 7n, async () => 'seven');
      await t.end('commit');
      expect(raisesArgument(t)).toBe(true);
      expect(await guard.highest()).toBe(7n);
      const u = await harness.begin(true);
      await guard.guardedWriteIn(u.tx, 7n, async () => 'seven again');
      await u.end('commit');
      expect(raisesArgument(u)).toBe(false);
    });

    it('refuses its configuration by name: a Kysely instance without its pool, a db that is neither, a checkLease function that answers no lease name', async () => {
      for (const { make, path, message } of harness.refusedConfigurations) {
        const err = await caught(Promise.resolve().then(make));
        expect(err).toMatchObject({ name: 'ConfigError', component: harness.component, issues: [{ path, message: expect.stringMatching(message) }] });
      }
      const guard = harness.guard(nextResource(), { migrated: true, checkLease: () => 'not a lease name!' });
      expect(await caught(guard.guardedWrite(1n, async () => 'never'))).toMatchObject({ name: 'ConfigError', component: harness.component, issues: [{ path: 'checkLease' }] });
    });
  });
}
