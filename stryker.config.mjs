// StrykerJS for `pnpm mutate --module <file.ts>` (scripts/mutate/run-mutate.ts passes --mutate): the
// tests named for the module, or else the unit project's tests that import it (vitest's related
// files), each mutant run against the tests that covered its line (per-test coverage). Not part of
// `pnpm test`.
/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  testRunner: 'vitest',
  plugins: ['@stryker-mutator/vitest-runner'],
  // Named tests (FENCED_MUTATE_TESTS, see vitest.mutate.config.ts) run as named: vitest's related
  // files do not follow an import through a package's index, and would leave most of them out.
  vitest: { configFile: 'vitest.mutate.config.ts', related: (process.env.FENCED_MUTATE_TESTS ?? '') === '' },
  coverageAnalysis: 'perTest',
  // Two cores, and the tests share PostgreSQL, Redis and MariaDB: one mutant at a time.
  concurrency: 1,
  // Past its covering tests' own time (x1.5), a mutant that runs 15 s more hangs: it is a timeout,
  // counted as killed. Mutants of a wait loop hang often (the takeover's), and each one costs this
  // and a new test runner.
  timeoutMS: 15_000,
  // progress-append-only: a line every few seconds (mutants tested, survived, time left), so that a
  // long run (an etcd module's tests take about a minute a mutant) says how far it is.
  reporters: ['clear-text', 'progress-append-only', 'json'],
  jsonReporter: { fileName: 'reports/mutation/mutation.json' },
  tempDirName: '.stryker-tmp',
  cleanTempDir: 'always',
};
