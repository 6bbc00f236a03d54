// A stream of guarded writes through a fault of the fence database (a restart, a freeze), shared by
// the PostgreSQL and MySQL stores' tests: four writers write ids 1, 2, … one guarded write each, the
// fault strikes once the stream is going, and the stream must go on past it.
import { isFencedError } from '@fenced/shared';
import { expect } from 'vitest';
import { waitFor } from './redis.js';

export type WriteOutcome = 'committed' | 'nothing applied' | 'outcome unknown';

/** How many writers the stream runs at once. */
const WRITERS = 4;

/** The stream as a fault sees it while it strikes. */
export interface StreamProgress {
  /** Writers the stream runs at once. */
  readonly writers: number;
  /** Writes started and not yet answered. */
  readonly inFlight: number;
  /** Writes answered (committed or failed). */
  readonly completed: number;
}

export interface WriteStream {
  /** What each write said: committed, or failed typed (GUARD_UNAVAILABLE, saying whether its commit's outcome is unknown). */
  readonly outcomes: ReadonlyMap<number, WriteOutcome>;
  /** Errors that were not the guard's typed unavailable error. */
  readonly unexpected: readonly unknown[];
  /** Writes that committed after the fault ended. */
  readonly committedAfterFault: number;
}

/**
 * Runs the stream (`WRITERS` writers): `fault` strikes once 40 writes committed (it is handed the
 * stream's progress, to wait on the writers), and the stream ends once 40 more committed after it
 * (bounded by `boundMs`).
 */
export async function streamThroughFault(
  write: (id: number) => Promise<void>,
  fault: (stream: StreamProgress) => Promise<void>,
  boundMs = 45_000,
): Promise<WriteStream> {
  const outcomes = new Map<number, WriteOutcome>();
  const unexpected: unknown[] = [];
  const stream = { writers: WRITERS, inFlight: 0, completed: 0 };
  let faultOver = false;
  let committedAfterFault = 0;
  let next = 0;
  const writeOne = async (id: number) => {
    stream.inFlight++;
    try {
      await write(id);
      outcomes.set(id, 'committed');
      if (faultOver) committedAfterFault++;
    } catch (err) {
      if (!isFencedError(err, 'GUARD_UNAVAILABLE')) {
        unexpected.push(err);
        return;
      }
      outcomes.set(id, (err as Error).message.includes('outcome is unknown') ? 'outcome unknown' : 'nothing applied');
      // The server is down for a moment: do not spin through ids while it is.
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      stream.inFlight--;
      stream.completed++;
    }
  };
  const deadline = performance.now() + boundMs;
  const writer = async () => {
    while (committedAfterFault < 40 && performance.now() < deadline && unexpected.length === 0) await writeOne(++next);
  };
  const writers = Promise.all(Array.from({ length: WRITERS }, writer));
  await waitFor(() => [...outcomes.values()].filter((o) => o === 'committed').length >= 40, 20_000);
  await fault(stream);
  faultOver = true;
  await writers;
  return { outcomes, unexpected, committedAfterFault };
}

/**
 * What every stream must show whatever the fault: no error but the typed one, the stream going on
 * past the fault, and the table agreeing with what each write said (a committed write is there, one
 * that said nothing was applied is not, and no row that was never written).
 */
export function expectStreamHeld(stream: WriteStream, present: ReadonlySet<number>): void {
  expect(stream.unexpected).toEqual([]);
  expect(stream.committedAfterFault).toBeGreaterThanOrEqual(40);
  for (const [id, outcome] of stream.outcomes) {
    if (outcome === 'committed') expect(present.has(id), `write ${id} committed but is missing`).toBe(true);
    if (outcome === 'nothing applied') expect(present.has(id), `write ${id} said nothing was applied but is present`).toBe(false);
  }
  for (const id of present) expect(stream.outcomes.has(id), `row ${id} was never written`).toBe(true);
}

/**
 * The freeze: the server stopped (SIGSTOP) until every writer is waiting on it and none has finished
 * for `quietMs`, then woken. Nothing breaks in a freeze, so every write must then commit.
 */
export async function freezeUntilStuck(server: { pause(): void; resume(): void }, stream: StreamProgress, quietMs = 1000): Promise<void> {
  server.pause();
  try {
    let seen = stream.completed;
    let quietSince = performance.now();
    await waitFor(
      () => {
        if (stream.completed !== seen) {
          seen = stream.completed;
          quietSince = performance.now();
        }
        return stream.inFlight === stream.writers && performance.now() - quietSince >= quietMs;
      },
      20_000,
      20,
    );
  } finally {
    server.resume();
  }
}
