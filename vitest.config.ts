import { fileURLToPath } from 'node:url';
import { defaultServerConditions } from 'vite';
import { configDefaults, defineConfig } from 'vitest/config';

// Tests run on source: the `@fenced/source` export condition points each workspace package at its
// src/index.ts, so no build is needed first.
const conditions = ['@fenced/source', ...defaultServerConditions];

export default defineConfig({
  resolve: {
    conditions,
    alias: { '#test-support': fileURLToPath(new URL('./test/support/index.ts', import.meta.url)) },
  },
  ssr: { resolve: { conditions } },
  test: {
    // Two projects, run one after the other by `pnpm test`: the simulation runs real replicas with
    // real timing, so it gets the machine to itself.
    projects: [
      { extends: true, test: { name: 'unit', include: ['packages/*/src/**/*.test.ts', 'test/**/*.test.ts'], exclude: [...configDefaults.exclude, 'test/sim/**'] } },
      { extends: true, test: { name: 'sim', include: ['test/sim/**/*.test.ts'], exclude: [...configDefaults.exclude], fileParallelism: false, maxWorkers: 1 } },
    ],
    globalSetup: ['./test/support/global-setup.ts'],
    setupFiles: ['./vitest.setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Two cores: more workers only fight over them and over the shared services.
    maxWorkers: 2,
  },
});
