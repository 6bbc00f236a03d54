import { ValueType, type Attributes, type Counter, type Histogram, type MeterProvider, type ObservableGauge, type ObservableResult } from '@opentelemetry/api';
import { ATTR_JOB, ATTR_LEASE, coordinatorMeter, secondsHistogram } from './instruments.js';

/** The scheduler's instruments, labelled by lease and job name (both bounded by configuration). */
export class SchedulerMetrics {
  readonly #lease: string;
  readonly #jobAttributes = new Map<string, Attributes>();
  readonly #dispatched: Counter;
  readonly #caughtUp: Counter;
  readonly #skipped: Counter;
  readonly #failed: Counter;
  readonly #givenUp: Counter;
  readonly #stale: Counter;
  readonly #lateness: Histogram;
  readonly #failoverGap: Histogram;
  readonly #backlog: ObservableGauge;
  readonly #observeBacklog: (result: ObservableResult) => void;
  #observing = false;

  /** @param backlog fires due and not dispatched yet, per job (catch-up included). */
  constructor(provider: MeterProvider | undefined, lease: string, backlog: () => Iterable<[job: string, pending: number]>) {
    const meter = coordinatorMeter(provider);
    this.#lease = lease;
    this.#dispatched = meter.createCounter('fenced.scheduler.fires.dispatched', { unit: '{fire}', description: 'Fires handed to their handler or queue' });
    this.#caughtUp = meter.createCounter('fenced.scheduler.fires.caught_up', {
      unit: '{fire}',
      description: 'Dispatched fires that were planned as catch-up at an election (due before the term began)',
    });
    this.#skipped = meter.createCounter('fenced.scheduler.fires.skipped', { unit: '{fire}', description: 'Missed fires the misfire policy chose not to run' });
    this.#failed = meter.createCounter('fenced.scheduler.fires.failed', {
      unit: '{fire}',
      description: 'Dispatches that failed (the handler threw, the queue refused the job); each such fire is dispatched again',
    });
    this.#givenUp = meter.createCounter('fenced.scheduler.fires.given_up', {
      unit: '{fire}',
      description: 'Fires never to be dispatched again: given up by their handler, or still failing when they fell out of the catch-up window',
    });
    this.#stale = meter.createCounter('fenced.scheduler.fires.stale', {
      unit: '{fire}',
      description: "Fires whose write was refused as stale: a later term leads and catches them up",
    });
    this.#lateness = secondsHistogram(meter, 'fenced.scheduler.fire.lateness', 'How long after its due time (by the Redis server clock) each fire was dispatched');
    this.#failoverGap = secondsHistogram(
      meter,
      'fenced.scheduler.failover.gap',
      "From the previous term's last dispatch to this term's first (server clock), at each change of term",
    );
    this.#backlog = meter.createObservableGauge('fenced.scheduler.backlog', { unit: '{fire}', description: 'Fires due and waiting to be dispatched by this leader', valueType: ValueType.INT });
    this.#observeBacklog = (result) => {
      for (const [job, pending] of backlog()) result.observe(pending, this.#attributes(job));
    };
  }

  observe(): void {
    if (this.#observing) return;
    this.#observing = true;
    this.#backlog.addCallback(this.#observeBacklog);
  }

  unobserve(): void {
    if (!this.#observing) return;
    this.#observing = false;
    this.#backlog.removeCallback(this.#observeBacklog);
  }

  dispatched(job: string, latenessMs: number | null, caughtUp: boolean): void {
    const attributes = this.#attributes(job);
    this.#dispatched.add(1, attributes);
    if (caughtUp) this.#caughtUp.add(1, attributes);
    if (latenessMs !== null) this.#lateness.record(Math.max(0, latenessMs) / 1000, attributes);
  }

  failed(job: string): void {
    this.#failed.add(1, this.#attributes(job));
  }

  givenUp(job: string): void {
    this.#givenUp.add(1, this.#attributes(job));
  }

  stale(job: string): void {
    this.#stale.add(1, this.#attributes(job));
  }

  skipped(job: string, count: number): void {
    if (count > 0) this.#skipped.add(count, this.#attributes(job));
  }

  failoverGap(gapMs: number): void {
    this.#failoverGap.record(Math.max(0, gapMs) / 1000, { [ATTR_LEASE]: this.#lease });
  }

  #attributes(job: string): Attributes {
    let attributes = this.#jobAttributes.get(job);
    if (attributes === undefined) this.#jobAttributes.set(job, (attributes = { [ATTR_LEASE]: this.#lease, [ATTR_JOB]: job }));
    return attributes;
  }
}
