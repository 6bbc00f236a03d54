/**
 * What happened during a run, as the supervisor saw it. Times are wall-clock epoch milliseconds of
 * the supervisor (which never runs under a clock fault), stamped when a line was read.
 */
export type HistoryEvent =
  /** A replica's belief about its leadership changed (elected with `token`, or no longer leading). */
  | { at: number; kind: 'belief'; node: string; leader: boolean; token?: string; reason?: string }
  /**
   * A replica dispatched a fire. What it may add, for the layer checks: when the fire was due (epoch
   * ms), and whether its own lease was current with this token at that moment.
   */
  | { at: number; kind: 'dispatch'; node: string; fireId: string; token: string; scheduledAt?: number; leading?: boolean }
  /**
   * The handler a replica dispatched a fire to returned (or threw): from its dispatch until now that
   * replica's job was busy with it, and the scheduler runs one fire of a job at a time.
   */
  | { at: number; kind: 'handled'; node: string; fireId: string }
  /**
   * A write attempt by a replica and what became of it (`begin`: its handler started). A `begin` may
   * carry the highest token the guard knew of just before the handler was called, for the handler check.
   */
  | { at: number; kind: 'write'; node: string; fireId: string; token: string; outcome: WriteOutcome; reason?: string; highestBefore?: string }
  /**
   * A fault injected by the supervisor, from `start` to `end`. `unreachable` (on `start`) names the
   * stores every replica is cut off from meanwhile.
   */
  | { at: number; kind: 'fault'; fault: string; target?: string; phase: 'start' | 'end'; detail?: string; unreachable?: readonly ('postgres' | 'redis')[] }
  /** A replica hit a failpoint it was armed with (see `SimApp`), stopping or stalling there: the exact moment a fault aims at. */
  | { at: number; kind: 'failpoint'; node: string; name: string; action?: string }
  /** A replica found its new token at or below what a fence had committed, and raised the counter past it. */
  | { at: number; kind: 'repair'; node: string; token: string }
  /** A replica process started or exited. */
  /** `crashed`: it exited on its own with a failure (an unhandled error), not by a fault's signal. */
  | { at: number; kind: 'process'; node: string; event: 'started' | 'exited' | 'paused' | 'resumed'; crashed?: boolean }
  /** An election-time advance ended (or was not allowed to end) a deposed leader's transaction that blocked it. */
  | { at: number; kind: 'takeover'; node: string; ended: boolean }
  /**
   * A process's event loop ran `ms` late, up to `at` (the machine starved it of CPU): from `at - ms`
   * to `at` it could not act. Reported by each replica's probe and by the supervisor's own (`node:
   * 'supervisor'`); see checker/starvation.ts.
   */
  | { at: number; kind: 'starved'; node: string; ms: number }
  /**
   * A replica's lease store refused a grant or renewal its primary confirmation did not count: from a
   * deposed PostgreSQL primary (a failover it did not see), or from a Redis server the sentinels do not
   * all name (`server`, `host:port`: a failover still spreading among them).
   */
  | { at: number; kind: 'deposed'; node: string; operation: string; server?: string };

export type WriteOutcome = 'begin' | 'committed' | 'stale' | 'duplicate' | 'failed';

/** One effect that took hold in the guarded store: a committed ledger row. */
export interface Effect {
  readonly resource: string;
  readonly fireId: string;
  readonly token: bigint;
  readonly node: string;
  /** Position in commit order (stamped at commit time, see the example app's ledger). */
  readonly commitSeq: number;
  /** When the fire was due, epoch ms (server clock). */
  readonly scheduledAt: number;
  /** When the row committed, epoch ms (database clock). */
  readonly committedAt: number;
}

type FaultEvent = Extract<HistoryEvent, { kind: 'fault' }>;

/**
 * The fault a fault kind records (start and end at once, its reason as the detail) when it could not
 * set up what it needed within its deadline: a run without a protection its scenario exercises is
 * then inconclusive, not toothless (`verdictOf`), and the history says why.
 */
export const PRECONDITION_MISSED = 'precondition missed';

/**
 * The fault the rounds record (start and end at once, the error as the detail) when the toolkit
 * itself failed mid-run: a deployment that did not heal (a Redis replica that never synced again), a
 * server that did not answer its admin command. The rounds end there; the run is healed, settled and
 * checked as any (safety is judged), and its verdict is failed, naming the error (`verdictOf`): a
 * defect to read in the kept run, never a pass, and no longer a throw that ended the whole simulation
 * with no table, no report and nothing kept. A run that fails outside the rounds (a server that did
 * not start, the effects that could not be read) records it too, naming the phase, and ends there.
 */
export const HARNESS_FAILED = 'harness failed';

/**
 * Each fault from its `start` to its `end`, in order of start: an end closes the latest open start of
 * the same fault on the same target. A fault that never ended has no `end`.
 */
export function faultSpans(events: readonly HistoryEvent[]): Array<{ start: FaultEvent; end: number | undefined }> {
  const spans: Array<{ start: FaultEvent; end: number | undefined }> = [];
  const open = new Map<string, Array<{ start: FaultEvent; end: number | undefined }>>();
  for (const e of events) {
    if (e.kind !== 'fault') continue;
    const key = `${e.fault}|${e.target ?? ''}`;
    if (e.phase === 'start') {
      const span = { start: e, end: undefined };
      spans.push(span);
      open.set(key, [...(open.get(key) ?? []), span]);
    } else {
      const span = open.get(key)?.pop();
      if (span !== undefined) span.end = e.at;
    }
  }
  return spans;
}

/** An append-only history. */
export class History {
  readonly events: HistoryEvent[] = [];

  record(event: HistoryEvent): void {
    this.events.push(event);
  }

  /** Events of one kind, in order. */
  of<K extends HistoryEvent['kind']>(kind: K): Array<Extract<HistoryEvent, { kind: K }>> {
    return this.events.filter((e): e is Extract<HistoryEvent, { kind: K }> => e.kind === kind);
  }
}
