import { metrics, ValueType, type Attributes, type Counter, type Histogram, type MeterProvider, type ObservableGauge } from '@opentelemetry/api';
import type { FencedEvent, FencedLogger } from '@fenced/shared';

/** The instrumentation scope the guard's instruments are created under. */
export const METER_NAME = '@fenced/consumer-guard';

/** Bucket boundaries in seconds, from a loopback round trip to a slow transaction. */
const SECONDS_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** Attribute keys. Never fire ids or tokens; the resource only when the guard's options ask for it. */
export const ATTR_RESOURCE = 'fenced.resource';
export const ATTR_OUTCOME = 'fenced.guard.outcome';
export const ATTR_PATH = 'fenced.guard.path';
export const ATTR_HANDLER_OUTCOME = 'fenced.handler.outcome';
export const ATTR_TAKEOVER_OUTCOME = 'fenced.guard.takeover.outcome';

/** How a guarded write ended, as the duration histogram labels it. */
export type WriteOutcome = 'accepted' | 'stale' | 'duplicate' | 'unavailable' | 'error';
/** How a wrapped handler ended. */
export type HandlerRunOutcome = 'applied' | 'duplicate' | 'stale' | 'refused' | 'failed';

export interface GuardMetricsOptions {
  readonly meterProvider: MeterProvider | undefined;
  /** Label every instrument with the resource (opt-in: resources named per customer would be unbounded). */
  readonly resourceAttribute: boolean;
  /** The guard's own resource: what the degraded gauge reports under when resources are labelled. */
  readonly resource: string;
  /** The kind of the fence store that decides (the `fenced.guard.path` of its decisions; `FenceStoreKind`). @defaultValue `'postgres'` */
  readonly authority?: string;
}

/**
 * The guard's and the handler wrapper's instruments. Decisions are counted from the guard's own
 * events (one place decides what an event means, so the log and the metrics never disagree);
 * durations are timed where the work happens. Without an OpenTelemetry SDK every call is a no-op.
 */
export class GuardMetrics {
  readonly #resourceAttribute: boolean;
  readonly #authority: string;
  readonly #byResource = new Map<string, AttributeSets>();
  #unlabelled: AttributeSets | undefined;
  readonly #writes: Counter;
  readonly #unavailable: Counter;
  readonly #retries: Counter;
  readonly #takeovers: Counter;
  readonly #connectionsLost: Counter;
  readonly #writeDuration: Histogram;
  readonly #checkDuration: Histogram;
  readonly #handlerRuns: Counter;
  readonly #handlerDuration: Histogram;
  readonly #degradedGauge: ObservableGauge;
  #degraded = false;

  constructor(options: GuardMetricsOptions) {
    const meter = (options.meterProvider ?? metrics.getMeterProvider()).getMeter(METER_NAME);
    this.#resourceAttribute = options.resourceAttribute;
    this.#authority = options.authority ?? 'postgres';
    const seconds = (name: string, description: string) =>
      meter.createHistogram(name, { unit: 's', description, valueType: ValueType.DOUBLE, advice: { explicitBucketBoundaries: SECONDS_BUCKETS } });
    this.#writes = meter.createCounter('fenced.guard.writes', {
      unit: '{write}',
      description: 'Guarded writes by outcome: accepted, stale (refused on the redis path or by the fence store: postgres, mysql), duplicate (fire already applied)',
    });
    this.#unavailable = meter.createCounter('fenced.guard.unavailable', { unit: '{error}', description: 'Calls that failed closed because the fence store (PostgreSQL, MySQL) could not be reached or failed' });
    this.#retries = meter.createCounter('fenced.guard.retries', { unit: '{retry}', description: 'Transactions run again after a deadlock or serialization failure' });
    this.#takeovers = meter.createCounter('fenced.guard.takeovers', {
      unit: '{transaction}',
      description: 'Guarded transactions of lower tokens that held up an election-time advance past its grace period, by outcome: ended, or denied (no right to signal them)',
    });
    this.#connectionsLost = meter.createCounter('fenced.guard.connections.lost', {
      unit: '{connection}',
      description: 'PostgreSQL connections the guard listened on that failed (a killed backend, a restart, a timeout) and were discarded',
    });
    this.#writeDuration = seconds('fenced.guard.write.duration', 'A guarded write from call to settle: fence check, your function, commit');
    this.#checkDuration = seconds('fenced.guard.check.duration', 'A check made before any transaction: the Redis fast path, or the pre-check (redis or postgres)');
    this.#handlerRuns = meter.createCounter('fenced.handler.fires', { unit: '{fire}', description: 'Fires a wrapped handler settled, by outcome' });
    this.#handlerDuration = seconds('fenced.handler.duration', 'A wrapped handler from envelope to outcome');
    this.#degradedGauge = meter.createObservableGauge('fenced.guard.degraded', {
      unit: '{guard}',
      description: '1 while the Redis fast path is not answering and the guard decides on PostgreSQL alone',
      valueType: ValueType.INT,
    });
    const degradedAttributes = this.#attributes(options.resource).base;
    // The guard lives as long as the process in practice; the callback holds nothing but this object.
    this.#degradedGauge.addCallback((result) => result.observe(this.#degraded ? 1 : 0, degradedAttributes));
  }

  /** A logger that feeds the instruments, then the user's logger. */
  observing(logger: FencedLogger | undefined): FencedLogger {
    return (event) => {
      this.record(event);
      logger?.(event);
    };
  }

  record(event: FencedEvent): void {
    switch (event.type) {
      case 'token.accepted':
        return this.#writes.add(1, this.#attributes(event.resource).writes.accepted);
      case 'token.rejected': {
        const writes = this.#attributes(event.resource).writes;
        return this.#writes.add(1, event.via === 'redis' ? writes.staleRedis : writes.staleStore);
      }
      case 'guard.duplicate':
        return this.#writes.add(1, this.#attributes(event.resource).writes.duplicate);
      case 'guard.unavailable':
        return this.#unavailable.add(1, this.#attributes(event.resource).base);
      case 'guard.retry':
        return this.#retries.add(1, this.#attributes(event.resource).base);
      case 'guard.takeover': {
        const takeovers = this.#attributes(event.resource).takeovers;
        return this.#takeovers.add(1, event.ended ? takeovers.ended : takeovers.denied);
      }
      case 'guard.connection-lost':
        return this.#connectionsLost.add(1, this.#attributes(event.resource).base);
      case 'guard.degraded':
        this.#degraded = true;
        return;
      case 'guard.recovered':
        this.#degraded = false;
        return;
      default:
        return;
    }
  }

  write(startedAt: number, resource: string, outcome: WriteOutcome): void {
    this.#writeDuration.record((performance.now() - startedAt) / 1000, this.#attributes(resource).durations[outcome]);
  }

  /** Runs a guarded write and records its duration under the outcome it ended with. */
  async timeWrite<T>(resource: string, run: () => Promise<T>): Promise<T> {
    const startedAt = performance.now();
    try {
      const result = await run();
      this.write(startedAt, resource, 'accepted');
      return result;
    } catch (err) {
      this.write(startedAt, resource, writeOutcomeOf(err));
      throw err;
    }
  }

  /** @param path `'redis'` for the fast path, else the deciding store's kind. */
  check(startedAt: number, resource: string, path: string): void {
    const checks = this.#attributes(resource).checks;
    this.#checkDuration.record((performance.now() - startedAt) / 1000, path === 'redis' ? checks.redis : checks.store);
  }

  handler(startedAt: number, resource: string, outcome: HandlerRunOutcome): void {
    const attributes = this.#attributes(resource).handler[outcome];
    this.#handlerRuns.add(1, attributes);
    this.#handlerDuration.record((performance.now() - startedAt) / 1000, attributes);
  }

  /** The attribute sets of one resource (of every resource, when resources are not labelled). */
  #attributes(resource: string): AttributeSets {
    if (!this.#resourceAttribute) return (this.#unlabelled ??= attributeSets({}, this.#authority));
    let sets = this.#byResource.get(resource);
    if (sets === undefined) {
      // Bounded by the resources the user chose to label by (that is what opting in means).
      sets = attributeSets({ [ATTR_RESOURCE]: resource }, this.#authority);
      this.#byResource.set(resource, sets);
    }
    return sets;
  }
}

/**
 * Every attribute set an instrument records with, built once: recording looks one up and allocates
 * nothing, which keeps the cost of the instruments off the write path when no SDK is installed.
 */
interface AttributeSets {
  readonly base: Attributes;
  readonly writes: { readonly accepted: Attributes; readonly staleRedis: Attributes; readonly staleStore: Attributes; readonly duplicate: Attributes };
  readonly durations: Readonly<Record<WriteOutcome, Attributes>>;
  readonly checks: { readonly redis: Attributes; readonly store: Attributes };
  readonly handler: Readonly<Record<HandlerRunOutcome, Attributes>>;
  readonly takeovers: { readonly ended: Attributes; readonly denied: Attributes };
}

function attributeSets(base: Attributes, authority: string): AttributeSets {
  const with_ = (extra: Attributes): Attributes => Object.freeze({ ...base, ...extra });
  const outcomes: WriteOutcome[] = ['accepted', 'stale', 'duplicate', 'unavailable', 'error'];
  const runs: HandlerRunOutcome[] = ['applied', 'duplicate', 'stale', 'refused', 'failed'];
  return {
    base: Object.freeze({ ...base }),
    writes: {
      accepted: with_({ [ATTR_OUTCOME]: 'accepted', [ATTR_PATH]: authority }),
      staleRedis: with_({ [ATTR_OUTCOME]: 'stale', [ATTR_PATH]: 'redis' }),
      staleStore: with_({ [ATTR_OUTCOME]: 'stale', [ATTR_PATH]: authority }),
      duplicate: with_({ [ATTR_OUTCOME]: 'duplicate', [ATTR_PATH]: authority }),
    },
    durations: Object.fromEntries(outcomes.map((o) => [o, with_({ [ATTR_OUTCOME]: o })])) as Record<WriteOutcome, Attributes>,
    checks: { redis: with_({ [ATTR_PATH]: 'redis' }), store: with_({ [ATTR_PATH]: authority }) },
    handler: Object.fromEntries(runs.map((o) => [o, with_({ [ATTR_HANDLER_OUTCOME]: o })])) as Record<HandlerRunOutcome, Attributes>,
    takeovers: { ended: with_({ [ATTR_TAKEOVER_OUTCOME]: 'ended' }), denied: with_({ [ATTR_TAKEOVER_OUTCOME]: 'denied' }) },
  };
}

/** How a guarded write's error reads as an outcome. */
export function writeOutcomeOf(err: unknown): WriteOutcome {
  const code = (err as { code?: unknown } | null)?.code;
  if (code === 'STALE_TOKEN') return 'stale';
  if (code === 'DUPLICATE_FIRE') return 'duplicate';
  if (code === 'GUARD_UNAVAILABLE') return 'unavailable';
  return 'error';
}
