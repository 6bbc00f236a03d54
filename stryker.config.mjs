// StrykerJS for `pnpm mutate --module <file.ts>` (scripts/mutate/run-mutate.ts passes --mutate): the
// unit project's tests that import the module (vitest's related files), each mutant run against the
// tests that covered its line (per-test coverage). Not part of `pnpm test`.
/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  testRunner: 'vitest',
  plugins: ['@stryker-mutator/vitest-runner'],
  vitest: { configFile: 'vitest.mutate.config.ts', related: true },
  coverageAnalysis: 'perTest',
  // Two cores, and the tests share PostgreSQL, Redis and MariaDB: one mutant at a time.
  concurrency: 1,
  timeoutMS: 60_000,
  reporters: ['clear-text', 'json'],
  jsonReporter: { fileName: 'reports/mutation/mutation.json' },
  tempDirName: '.stryker-tmp',
  cleanTempDir: 'always',
};
