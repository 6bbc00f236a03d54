import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { clockStepText, faketimeEnv, findLibfaketime } from './faketime.js';

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

  it('steps the wall clock of a running process when its timestamp file is rewritten, and leaves its monotonic clock alone', () => {
    const dir = mkdtempSync(join(tmpdir(), 'fenced-faketime-test-'));
    try {
      const file = join(dir, 'faketime');
      writeFileSync(file, clockStepText(0));
      // The process rewrites its own file (as the simulation does from outside) between two readings.
      const script = `
        const fs = require('node:fs');
        const w0 = Date.now(), m0 = performance.now();
        fs.writeFileSync(${JSON.stringify(file)}, ${JSON.stringify(clockStepText(-60_000))});
        const w1 = Date.now(), m1 = performance.now();
        fs.writeFileSync(${JSON.stringify(file)}, ${JSON.stringify(clockStepText(60_000))});
        const w2 = Date.now();
        console.log(JSON.stringify({ back: w1 - w0, forth: w2 - w1, mono: m1 - m0 }));`;
      const r = probe(faketimeEnv({ kind: 'stepped' }, file), script);
      const { back, forth, mono } = JSON.parse(r.stdout) as { back: number; forth: number; mono: number };
      expect(back).toBeLessThan(-59_000);
      expect(back).toBeGreaterThan(-61_000);
      expect(forth).toBeGreaterThan(119_000);
      expect(forth).toBeLessThan(121_000);
      expect(mono).toBeGreaterThanOrEqual(0);
      expect(mono).toBeLessThan(1000);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
