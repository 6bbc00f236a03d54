import { GuardUnavailableError, type Token } from '@fenced/shared';
import type { AuditEntry } from '../fence-records.js';

// The state an in-memory fence store keeps, what a database would hold: fences, the applied-fires
// record, the audit of lowerings, the migrations applied, and tables of rows for the writes the
// guard fences. Guards (one `memoryFences({ database })` each, one per "process" of a test) share
// one database. A resource's writes run one at a time under its lock, as a row lock serializes them.

/** One row of a table, as the writes put it. */
export type MemoryRow = Readonly<Record<string, unknown>>;

/** A fire's claim, with what its write recorded. */
export interface MemoryClaim {
  readonly token: Token;
  readonly outcome: string | null;
  readonly appliedAt: Date;
}

/** The newest migration this version of the store knows. */
export const MEMORY_MIGRATION = 1;

/**
 * What `fn` gets in a guarded write: its reads see the committed rows and its own; its rows commit
 * with the fence and the fire's claim, or not at all. Ended (`kill`) like a killed database session:
 * every call after that throws, and nothing of it is applied.
 */
export interface MemoryTransaction {
  /** The session's name (what an operator would end). */
  readonly session: string;
  /** Adds a row to `table`, visible to this transaction now and to everyone once it commits. */
  insert(table: string, row: MemoryRow): void;
  /** The committed rows of `table` and this transaction's own, in order. */
  rows(table: string): readonly MemoryRow[];
}

/** A transaction's own state, beside what `fn` sees of it. */
export interface OpenTransaction extends MemoryTransaction {
  readonly pending: ReadonlyMap<string, readonly MemoryRow[]>;
  /** Rejects once the session is ended: the write races `fn` against it. */
  readonly ended: Promise<never>;
  readonly isEnded: () => boolean;
}

interface LockHolder {
  readonly session: string;
  /** The token a guarded write announced (null for an advance or a lowering). */
  readonly token: Token | null;
}

interface ResourceLock {
  holder: LockHolder | null;
  readonly queue: Array<{ readonly who: LockHolder; readonly grant: () => void; readonly fail: (reason: Error) => void }>;
}

/** The shared state of the in-memory fence store (see `memoryFences`). */
export class MemoryFenceDatabase {
  readonly fences = new Map<string, Token>();
  readonly applied = new Map<string, Map<string, MemoryClaim>>();
  readonly audit: AuditEntry[] = [];
  readonly migrations = new Set<number>();
  readonly #tables = new Map<string, MemoryRow[]>();
  readonly #locks = new Map<string, ResourceLock>();
  readonly #enders = new Map<string, (reason: Error) => void>();
  /** The resource each waiting session waits for. */
  readonly #waiting = new Map<string, string>();
  /** The release of each lock held, by its holder's session: ending a session frees its lock. */
  readonly #held = new Map<string, () => void>();
  /** Sessions are numbered per database, as a server numbers its backends: the same run names the same sessions. */
  #sessions = 0;

  /** A new session's name. */
  newSession(): string {
    this.#sessions += 1;
    return `memory-${this.#sessions}`;
  }

  /** How many sessions wait on a lock now. */
  get lockWaits(): number {
    return this.#waiting.size;
  }

  /** The committed rows of `table`, in commit order. */
  rows(table: string): readonly MemoryRow[] {
    return [...(this.#tables.get(table) ?? [])];
  }

  /**
   * Takes the lock of `resource` for `who`, in arrival order; waits `timeoutMs` at most (0: as long as
   * it takes). Resolves with the release.
   */
  async lock(resource: string, who: LockHolder, timeoutMs: number): Promise<() => void> {
    let lock = this.#locks.get(resource);
    if (lock === undefined) {
      lock = { holder: null, queue: [] };
      this.#locks.set(resource, lock);
    }
    const held = lock;
    if (held.holder === null) {
      held.holder = who;
    } else {
      this.#waiting.set(who.session, resource);
      try {
        await new Promise<void>((resolve, reject) => {
          const entry = { who, grant: resolve, fail: reject };
          held.queue.push(entry);
          if (timeoutMs > 0) {
            setTimeout(() => {
              const at = held.queue.indexOf(entry);
              if (at < 0) return;
              held.queue.splice(at, 1);
              reject(new GuardUnavailableError(`memory fence store: ${resource}: waited ${timeoutMs} ms for the fence's lock`, { cause: undefined }));
            }, timeoutMs).unref();
          }
        });
      } finally {
        this.#waiting.delete(who.session);
      }
    }
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      this.#held.delete(who.session);
      const next = held.queue.shift();
      held.holder = next?.who ?? null;
      next?.grant();
    };
    this.#held.set(who.session, release);
    return release;
  }

  /** Who holds the lock of the resource `session` waits for, if it waits. */
  blockerOf(session: string): LockHolder | null {
    const resource = this.#waiting.get(session);
    return resource === undefined ? null : (this.#locks.get(resource)?.holder ?? null);
  }

  /** Opens a transaction on a new session. */
  begin(): OpenTransaction {
    const session = this.newSession();
    const pending = new Map<string, MemoryRow[]>();
    let ended: Error | null = null;
    let end!: (reason: Error) => void;
    const endedPromise = new Promise<never>((_, reject) => (end = reject));
    endedPromise.catch(() => {});
    this.#enders.set(session, (reason) => {
      ended = reason;
      end(reason);
    });
    const live = () => {
      if (ended !== null) throw ended;
    };
    return {
      session,
      pending,
      ended: endedPromise,
      isEnded: () => ended !== null,
      insert: (table, row) => {
        live();
        const rows = pending.get(table) ?? [];
        rows.push(Object.freeze({ ...row }));
        pending.set(table, rows);
      },
      rows: (table) => {
        live();
        return [...(this.#tables.get(table) ?? []), ...(pending.get(table) ?? [])];
      },
    };
  }

  /** Forgets a transaction's session (committed or rolled back). */
  close(tx: OpenTransaction): void {
    this.#enders.delete(tx.session);
  }

  /** Applies a transaction's rows: the caller holds the resource's lock and commits the rest with them. */
  applyRows(tx: OpenTransaction): void {
    for (const [table, rows] of tx.pending) {
      const committed = this.#tables.get(table) ?? [];
      committed.push(...rows);
      this.#tables.set(table, committed);
    }
  }

  /**
   * Ends `session` from outside, as an operator, a failover or a dead client's closed connection ends
   * a database session: its transaction fails, its wait for a lock fails, and the lock it held is
   * freed at once, as a database frees it: whatever its holder does next (it may be a process that
   * is frozen, or gone) no longer keeps the others waiting. True when it was open.
   */
  kill(session: string): boolean {
    const end = this.#enders.get(session);
    const release = this.#held.get(session);
    const waitingFor = this.#waiting.get(session);
    if (end === undefined && release === undefined && waitingFor === undefined) return false;
    const reason = new GuardUnavailableError(`memory fence store: session ${session} was ended during the write; nothing of it was applied`, { cause: undefined });
    this.#enders.delete(session);
    release?.();
    const queue = waitingFor === undefined ? [] : (this.#locks.get(waitingFor)?.queue ?? []);
    const at = queue.findIndex((entry) => entry.who.session === session);
    if (at >= 0) queue.splice(at, 1)[0]!.fail(reason);
    end?.(reason);
    return true;
  }

  /** The claims of `resource`. */
  claims(resource: string): Map<string, MemoryClaim> {
    let claims = this.applied.get(resource);
    if (claims === undefined) {
      claims = new Map();
      this.applied.set(resource, claims);
    }
    return claims;
  }
}

/** Creates the shared state of an in-memory fence store. */
export function createMemoryFenceDatabase(): MemoryFenceDatabase {
  return new MemoryFenceDatabase();
}
