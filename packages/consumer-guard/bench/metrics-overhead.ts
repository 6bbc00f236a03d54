/**
 * What the OpenTelemetry instruments cost the benchmarks: a real SDK meter provider (the reader
 * collects every second into memory, as an exporter would), and the recording work of one guarded
 * write timed alone, with the SDK and without one (the API's no-op instruments).
 */
import { AggregationTemporality, InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import { GuardMetrics } from '../src/metrics/guard-metrics.js';

export function sdkMeterProvider(): MeterProvider {
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  return new MeterProvider({ readers: [new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 1000 })] });
}

/**
 * Nanoseconds of instrument work per guarded write (the accepted event counted, the duration
 * recorded), median of `batches` batches, with the SDK and with the no-op API side by side.
 */
export function recordingCostNs(provider: MeterProvider, batches = 15, perBatch = 100_000): { on: number; off: number } {
  const on = new GuardMetrics({ meterProvider: provider, resourceAttribute: false, resource: 'bench' });
  const off = new GuardMetrics({ meterProvider: undefined, resourceAttribute: false, resource: 'bench' });
  const event = { type: 'token.accepted', resource: 'bench', token: 7n } as const;
  const time = (metrics: GuardMetrics) => {
    const t0 = performance.now();
    for (let i = 0; i < perBatch; i++) {
      metrics.record(event);
      metrics.write(t0, 'bench', 'accepted');
    }
    return ((performance.now() - t0) * 1e6) / perBatch;
  };
  const samples = { on: [] as number[], off: [] as number[] };
  for (let b = 0; b < batches; b++) {
    samples.on.push(time(on));
    samples.off.push(time(off));
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  return { on: Math.round(median(samples.on)), off: Math.round(median(samples.off)) };
}
