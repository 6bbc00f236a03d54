import { metrics, ValueType, type Attributes, type Histogram, type Meter, type MeterProvider } from '@opentelemetry/api';

/** The instrumentation scope the coordinator's instruments are created under. */
export const METER_NAME = '@fenced/coordinator';

/**
 * The coordinator's meter: from the provider the options name, else from the global one. Without an
 * OpenTelemetry SDK registered, the API hands out no-op instruments, so recording costs a call.
 * The global provider is read when the coordinator is created: register the SDK before that.
 */
export function coordinatorMeter(provider: MeterProvider | undefined): Meter {
  return (provider ?? metrics.getMeterProvider()).getMeter(METER_NAME);
}

/**
 * Bucket boundaries for durations in seconds: from a millisecond (a Redis round trip on loopback)
 * to a minute (a failover on a slow deployment). The SDK's default boundaries are meant for
 * milliseconds and would put every fenced duration in the first bucket.
 */
export const SECONDS_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

export function secondsHistogram(meter: Meter, name: string, description: string): Histogram<Attributes> {
  return meter.createHistogram(name, { unit: 's', description, valueType: ValueType.DOUBLE, advice: { explicitBucketBoundaries: SECONDS_BUCKETS } });
}

/** Attribute keys. Bounded by configuration: lease and job names, never fire ids or tokens. */
export const ATTR_LEASE = 'fenced.lease.name';
export const ATTR_JOB = 'fenced.job.name';
export const ATTR_LOSS_REASON = 'fenced.lease.loss.reason';
