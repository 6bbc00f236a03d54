import { afterEach, beforeEach, vi } from 'vitest';

// The library never writes to the console, and neither do its tests: a test that calls console.*
// fails, so stray logging cannot hide in CI output.
const methods = ['log', 'info', 'warn', 'error', 'debug'] as const;
let calls: string[] = [];

beforeEach(() => {
  calls = [];
  for (const method of methods) {
    vi.spyOn(console, method).mockImplementation((...args: unknown[]) => {
      calls.push(`console.${method}(${args.map(String).join(' ').slice(0, 200)})`);
    });
  }
});

afterEach(() => {
  vi.restoreAllMocks();
  if (calls.length > 0) throw new Error(`test wrote to the console:\n${calls.join('\n')}`);
});
