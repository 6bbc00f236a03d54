import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { faketimeEnv, findLibfaketime } from './faketime.js';

// Real processes under libfaketime, as the clock scenarios run replicas.
const probe = (env: Record<string, string>, script: string) =>
  spawnSync(process.execPath, ['-e', script], { env: { ...process.env, ...env }, encoding: 'utf8' });

describe.runIf(findLibfaketime() !== undefined)('faketimeEnv', () => {
  it('offsets the wall clock of a real Node process, and leaves its monotonic clock alone', () => {
    const before = Date.now();
    const r = probe(faketimeEnv({ kind: 'offset', offsetMs: 5000 }), 'console.log(JSON.stringify({ now: Date.now() }))');
    const { now } = JSON.parse(r.stdout) as { now: number };
    expect(now - before).toBeGreaterThan(4000);
    expect(now - before).toBeLessThan(8000);
  });

  it('slows every clock of a real Node process, so its timers fire late in real time', () => {
    const started = performance.now();
    const r = probe(faketimeEnv({ kind: 'rate', rate: 0.5 }), 'const t = performance.now(); setTimeout(() => console.log(performance.now() - t), 200)');
    const real = performance.now() - started;
    const seen = Number(r.stdout);
    expect(seen).toBeGreaterThanOrEqual(195); // the process saw its 200 ms…
    expect(real).toBeGreaterThan(380); // …which took about twice as long
  });
});

