import { AggregationTemporality, DataPointType, InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader, type DataPoint, type MetricData } from '@opentelemetry/sdk-metrics';
import type { Attributes } from '@opentelemetry/api';

/**
 * A real OpenTelemetry SDK meter provider whose reader exports into memory on demand: what a test
 * reads is exactly what an exporter (Prometheus, OTLP) would have been handed.
 */
export function inMemoryMetrics() {
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  // The interval is never reached in a test: collect() flushes on demand.
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 });
  const provider = new MeterProvider({ readers: [reader] });

  /** Every metric as of now (a fresh collection; cumulative, so later collections include earlier points). */
  async function collect(): Promise<MetricData[]> {
    exporter.reset();
    await reader.forceFlush();
    return exporter.getMetrics().flatMap((resourceMetrics) => resourceMetrics.scopeMetrics.flatMap((scope) => scope.metrics));
  }

  const matches = (point: DataPoint<unknown>, attributes: Attributes) => Object.entries(attributes).every(([key, value]) => point.attributes[key] === value);

  /** The data points of one instrument whose attributes include `attributes`. */
  async function points(name: string, attributes: Attributes = {}): Promise<DataPoint<unknown>[]> {
    const metric = (await collect()).find((m) => m.descriptor.name === name);
    return (metric?.dataPoints ?? []).filter((point) => matches(point as DataPoint<unknown>, attributes)) as DataPoint<unknown>[];
  }

  /** A counter's total over the matching points (0 when nothing was recorded). */
  async function sum(name: string, attributes: Attributes = {}): Promise<number> {
    return (await points(name, attributes)).reduce((total, point) => total + (point.value as number), 0);
  }

  /** A histogram's number of recordings over the matching points. */
  async function count(name: string, attributes: Attributes = {}): Promise<number> {
    return (await points(name, attributes)).reduce((total, point) => total + (point.value as { count: number }).count, 0);
  }

  /** A gauge's value at the matching point, or undefined when none was observed. */
  async function gauge(name: string, attributes: Attributes = {}): Promise<number | undefined> {
    const [point] = await points(name, attributes);
    return point?.value as number | undefined;
  }

  return { provider, collect, points, sum, count, gauge, shutdown: () => provider.shutdown(), DataPointType };
}
