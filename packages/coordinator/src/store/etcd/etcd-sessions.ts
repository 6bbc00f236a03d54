import type { Etcd3 } from 'etcd3';
import { withinBudget, type EtcdCallOptions } from './etcd-budget.js';
import { etcdUnavailable } from './etcd-errors.js';

/** An etcd lease a process holds its keys on: the leases it won, or its membership in a group. */
export interface EtcdSession {
  readonly id: string;
  readonly ttlSec: number;
  /** Set once etcd said the lease is gone (expired or revoked): its keys are gone with it. */
  dead: boolean;
}

/** Ends a keep-alive stream whose one exchange is over (or abandoned): a late reply or error is dropped. */
function closeStream(stream: NodeJS.EventEmitter & { end(): void }): void {
  stream.removeAllListeners('data');
  stream.on('error', () => {});
  stream.end();
}

/** A keep-alive not sent yet, which every renew asked for before it leaves shares. */
interface PendingKeepAlive {
  readonly answer: Promise<boolean>;
  timeoutMs: number;
}

/**
 * The etcd leases of one backend (one process), one per TTL in whole seconds, as etcd's own
 * concurrency sessions: every lease name this process wins with that TTL is a key attached to it, so
 * a thousand names cost one keep-alive per renew round, not a thousand.
 *
 * Safety rests on when a keep-alive is sent. etcd counts the lease's new TTL from when its leader
 * handles the keep-alive, so a renew may share a keep-alive only if that leaves after the renew was
 * asked for: the coordinator counts its deadline from its own send, which is then never later than
 * etcd's. A keep-alive joins only requests made before it is sent (the same turn of the event loop).
 */
export class EtcdSessions {
  readonly #client: Etcd3;
  readonly #sessions = new Map<number, Promise<EtcdSession>>();
  readonly #pending = new Map<string, PendingKeepAlive>();

  constructor(client: Etcd3) {
    this.#client = client;
  }

  /** A live session for `ttlMs` (rounded up to whole seconds), granted when there is none. */
  async session(ttlMs: number, timeoutMs: number): Promise<EtcdSession> {
    const ttlSec = Math.max(1, Math.ceil(ttlMs / 1000));
    const existing = this.#sessions.get(ttlSec);
    if (existing !== undefined) {
      const session = await existing.catch(() => null);
      if (session !== null && !session.dead) return session;
      if (this.#sessions.get(ttlSec) === existing) this.#sessions.delete(ttlSec);
      return this.session(ttlMs, timeoutMs);
    }
    const granted = withinBudget('leaseGrant', timeoutMs, (o) => this.#client.leaseClient.leaseGrant({ TTL: ttlSec, ID: 0 }, o)).then(
      (reply) => ({ id: String(reply.ID), ttlSec, dead: false }),
      (error: unknown) => {
        throw etcdUnavailable('lease grant', error);
      },
    );
    this.#sessions.set(ttlSec, granted);
    granted.catch(() => {
      if (this.#sessions.get(ttlSec) === granted) this.#sessions.delete(ttlSec);
    });
    return granted;
  }

  /**
   * Extends the session to its TTL from now: true when etcd did, false when the lease is gone.
   * Shared with every other request for the same session made before the keep-alive leaves.
   */
  keepAlive(session: EtcdSession, timeoutMs: number): Promise<boolean> {
    const pending = this.#pending.get(session.id);
    if (pending !== undefined) {
      pending.timeoutMs = Math.min(pending.timeoutMs, timeoutMs);
      return pending.answer;
    }
    const entry: PendingKeepAlive = { timeoutMs, answer: Promise.resolve(false) };
    (entry as { answer: Promise<boolean> }).answer = new Promise<void>((resolve) => setImmediate(resolve)).then(() => {
      this.#pending.delete(session.id);
      return this.#sendKeepAlive(session, entry.timeoutMs);
    });
    this.#pending.set(session.id, entry);
    return entry.answer;
  }

  async #sendKeepAlive(session: EtcdSession, timeoutMs: number): Promise<boolean> {
    // The duplex stream is a Node stream; etcd3's type shows only its gRPC half.
    type Stream = Awaited<ReturnType<Etcd3['leaseClient']['leaseKeepAlive']>> & NodeJS.EventEmitter;
    let stream: Stream | undefined;
    let abandoned = false;
    const exchange = async (options: EtcdCallOptions): Promise<{ TTL: string }> => {
      const opened = (await this.#client.leaseClient.leaseKeepAlive(options)) as Stream;
      // Opened after the budget ran out: nobody waits for it any more.
      if (abandoned) {
        closeStream(opened);
        throw new Error('keep-alive stream opened after its budget');
      }
      stream = opened;
      return new Promise<{ TTL: string }>((resolve, reject) => {
        opened.once('data', resolve);
        opened.once('error', reject);
        opened.write({ ID: session.id });
      });
    };
    try {
      const reply = await withinBudget('lease keep-alive', timeoutMs, exchange);
      // etcd answers a TTL of zero or less for a lease it no longer has.
      if (Number(reply.TTL) <= 0) {
        session.dead = true;
        return false;
      }
      return true;
    } catch (error) {
      throw etcdUnavailable('keep-alive', error);
    } finally {
      abandoned = true;
      if (stream !== undefined) closeStream(stream);
    }
  }

  /** Forgets a session etcd no longer has (a write on it answered "lease not found"). */
  drop(session: EtcdSession): void {
    session.dead = true;
  }

  /** Revokes every session (a graceful stop): their keys go at once. Best effort. */
  async revokeAll(timeoutMs: number): Promise<void> {
    const sessions = await Promise.all([...this.#sessions.values()].map((s) => s.catch(() => null)));
    this.#sessions.clear();
    await Promise.all(sessions.map((s) => (s === null || s.dead ? undefined : withinBudget('leaseRevoke', timeoutMs, (o) => this.#client.leaseClient.leaseRevoke({ ID: s.id }, o)).catch(() => undefined))));
  }
}
