import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { bundledEntry } from '../../examples/bundled-entry.js';

const script = fileURLToPath(new URL('./fixtures/bundled-script.ts', import.meta.url));
const run = (args: string[], env: Record<string, string> = {}) => promisify(execFile)(process.execPath, args, { env: { ...process.env, ...env } });

describe('bundledEntry: a simulation replica started without tsx', () => {
  it('refuses to name its arguments before it is built', () => {
    expect(() => bundledEntry(script).args()).toThrow(/not bundled yet: await ready\(\) first/);
  });

  it('runs the SDK from its sources, with every npm dependency imported from node_modules, not copied in', async () => {
    const entry = bundledEntry(script);
    await Promise.all([entry.ready(), entry.ready()]);
    const { stdout } = await run(entry.args());
    expect(JSON.parse(stdout)).toEqual({ token: '42', header: 'InvalidEnvelopeError' });
    const bundle = readFileSync(entry.args().at(-1)!, 'utf8');
    // The SDK's own modules are in the bundle (from packages/*/src, not a build); zod, which only
    // @fenced/shared depends on, is imported by its path in node_modules, as that package resolves it.
    expect(bundle).toContain('packages/shared/src/token.ts');
    expect(bundle).toMatch(/from "\/[^"]*\/node_modules\/[^"]*zod[^"]*"/);
    expect(bundle).not.toContain('packages/shared/dist/');
  });

  it('points a stack trace at the TypeScript source', async () => {
    const entry = bundledEntry(script);
    await entry.ready();
    const failed = await run(entry.args(), { THROW: '1' }).then(
      () => undefined,
      (err: { stderr: string; code: number }) => err,
    );
    expect(failed?.code).toBe(1);
    expect(failed?.stderr).toMatch(/thrown on purpose\n\s+at .*test\/examples\/fixtures\/bundled-script\.ts:16:/);
  });
});
