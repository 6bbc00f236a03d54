import { fileURLToPath } from 'node:url';
import { defaultServerConditions } from 'vite';
import { configDefaults, defineConfig } from 'vitest/config';

// Tests run on source: the `@fenced/source` export condition points each workspace package at its
// src/index.ts, so no build is needed first.
const conditions = ['@fenced/source', ...defaultServerConditions];

// The SDK supports ioredis 5 and 6: the `ioredis6` project runs every test that talks to Redis again
// with ioredis 6.0.0 in place of the workspace's ioredis 5 (installed as the `ioredis6` alias).
const ioredis6 = fileURLToPath(new URL('./node_modules/ioredis6/built/index.js', import.meta.url));
const redisTests = ['test/redis/ioredis-major.test.ts', 'test/lease-store/conformance-redis.test.ts', 'packages/*/src/**/*.redis.test.ts', 'test/redis/redis-cluster.test.ts', 'test/redis/redis-sentinel.test.ts', 'test/coordinator/coordinator-*.test.ts', 'test/coordinator/scheduler-*.test.ts'];

// Test files that replace a module with vi.mock: in a worker whose files share modules, the counting
// copy would reach the files after them (and a module already loaded would escape it), so they run
// in a project of their own with isolation on.
const mockedModules = ['test/repo/token-parse-count.test.ts'];

export default defineConfig({
  resolve: {
    conditions,
    alias: { '#test-support': fileURLToPath(new URL('./test/support/index.ts', import.meta.url)) },
  },
  ssr: { resolve: { conditions } },
  test: {
    // Run by `pnpm test` in four steps, one after the other: unit with unit-mocked, ioredis6, install,
    // sim (it runs real replicas with real timing, so it gets the machine to itself).
    projects: [
      // Three workers on two cores: most of its files wait on real time (a TTL running out, a server
      // restarting), not the CPU. Measured quiet: 301 s with two, 247 s with three (394 s of CPU).
      // Files share a worker's module graph (isolate: false): loading the packages and their drivers
      // again for each of 116 files was a fifth of the project's time (quiet, 195 s isolated against
      // 154 s shared). Every file stops what it starts in its own hooks, so nothing of one reaches the
      // next; the one file that replaces a module (vi.mock) runs isolated, in `unit-mocked`.
      { extends: true, test: { name: 'unit', maxWorkers: 3, isolate: false, env: { FENCED_IOREDIS_MAJOR: '5' }, include: ['packages/*/src/**/*.test.ts', 'test/**/*.test.ts'], exclude: [...configDefaults.exclude, 'test/sim/**', 'test/install/**', ...mockedModules] } },
      { extends: true, test: { name: 'unit-mocked', maxWorkers: 3, env: { FENCED_IOREDIS_MAJOR: '5' }, include: mockedModules } },
      // The packages installed from their tarballs by npm, pnpm and yarn: CPU-heavy installs, run alone.
      { extends: true, test: { name: 'install', include: ['test/install/**/*.test.ts'], fileParallelism: false, maxWorkers: 1 } },
      { extends: true, resolve: { alias: [{ find: /^ioredis$/, replacement: ioredis6 }] }, test: { name: 'ioredis6', isolate: false, include: redisTests, env: { FENCED_IOREDIS_MAJOR: '6' } } },
      { extends: true, test: { name: 'sim', include: ['test/sim/**/*.test.ts'], exclude: [...configDefaults.exclude], fileParallelism: false, maxWorkers: 1 } },
    ],
    globalSetup: ['./test/support/global-setup.ts'],
    setupFiles: ['./vitest.setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Two cores: more workers only fight over them and over the shared services (but see `unit`).
    maxWorkers: 2,
  },
});
