import { ValueType, type Attributes, type Counter, type Histogram, type MeterProvider, type ObservableGauge, type ObservableResult } from '@opentelemetry/api';
import type { LeaseLossReason, Token } from '@fenced/shared';
import { ATTR_LEASE, ATTR_LOSS_REASON, coordinatorMeter, secondsHistogram } from './instruments.js';

/**
 * The lease's instruments for one coordinator. The two gauges are read when the SDK collects, from
 * the coordinator's own state, so they are exact at collection time and cost nothing in between.
 */
export class LeaseMetrics {
  readonly #attributes: Attributes;
  readonly #elections: Counter;
  readonly #losses: Counter;
  readonly #regressions: Counter;
  readonly #renewDuration: Histogram;
  readonly #remaining: Histogram;
  readonly #leader: ObservableGauge;
  readonly #token: ObservableGauge;
  readonly #observeLeader: (result: ObservableResult) => void;
  readonly #observeToken: (result: ObservableResult) => void;
  readonly #lossAttributes = new Map<LeaseLossReason, Attributes>();
  #observing = false;

  /** @param currentToken the token of the term this node leads now, or null. */
  constructor(provider: MeterProvider | undefined, lease: string, currentToken: () => Token | null) {
    const meter = coordinatorMeter(provider);
    this.#attributes = { [ATTR_LEASE]: lease };
    this.#elections = meter.createCounter('fenced.lease.elections', { unit: '{election}', description: 'Terms this node won' });
    this.#losses = meter.createCounter('fenced.lease.losses', { unit: '{loss}', description: 'Terms that ended, by reason (stolen, deadline, stopped, handover)' });
    this.#regressions = meter.createCounter('fenced.lease.token.regressions', {
      unit: '{regression}',
      description: 'Elections that found a fence at or above the new token (Redis lost the counter) and raised the counter past it',
    });
    this.#renewDuration = secondsHistogram(meter, 'fenced.lease.renew.duration', 'Round trip of each successful renew');
    this.#remaining = secondsHistogram(meter, 'fenced.lease.remaining', 'Time left before the local deadline when each renew is sent');
    this.#leader = meter.createObservableGauge('fenced.lease.leader', { unit: '{leader}', description: '1 while this node believes it leads the lease, else 0', valueType: ValueType.INT });
    this.#token = meter.createObservableGauge('fenced.lease.token', { unit: '{token}', description: 'The fencing token of the term this node leads (absent while it does not lead)', valueType: ValueType.INT });
    this.#observeLeader = (result) => result.observe(currentToken() === null ? 0 : 1, this.#attributes);
    this.#observeToken = (result) => {
      const token = currentToken();
      // A gauge is a double: exact up to 2^53, which a counter incremented once per election never reaches.
      if (token !== null) result.observe(Number(token), this.#attributes);
    };
  }

  /** Starts reporting the gauges (a stopped coordinator keeps no callback alive in the SDK). */
  observe(): void {
    if (this.#observing) return;
    this.#observing = true;
    this.#leader.addCallback(this.#observeLeader);
    this.#token.addCallback(this.#observeToken);
  }

  unobserve(): void {
    if (!this.#observing) return;
    this.#observing = false;
    this.#leader.removeCallback(this.#observeLeader);
    this.#token.removeCallback(this.#observeToken);
  }

  elected(): void {
    this.#elections.add(1, this.#attributes);
  }

  lost(reason: LeaseLossReason): void {
    let attributes = this.#lossAttributes.get(reason);
    if (attributes === undefined) this.#lossAttributes.set(reason, (attributes = { ...this.#attributes, [ATTR_LOSS_REASON]: reason }));
    this.#losses.add(1, attributes);
  }

  regressed(): void {
    this.#regressions.add(1, this.#attributes);
  }

  /** A renew that succeeded: its round trip and the time that was left when it was sent, in ms. */
  renewed(roundTripMs: number, remainingMs: number): void {
    this.#renewDuration.record(roundTripMs / 1000, this.#attributes);
    this.#remaining.record(Math.max(0, remainingMs) / 1000, this.#attributes);
  }
}
