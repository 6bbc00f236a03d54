#!/usr/bin/env node
// `pnpm test`: a check that the services answer and the generated-module check; then, side by side,
// the type check (with ioredis 5 and 6), the protocol's model check, and the packages as a consumer
// gets them (publint, attw); then the unit/integration project, the Redis tests again on ioredis 6,
// the install from the tarballs the package checks packed, and the simulation project, one after the
// other (the simulation runs real replicas with real timing, so it gets the machine to itself).
//
// A failing step does not hide the others: every step runs (unless the services are missing: then
// nothing could pass), a summary names what failed, and the exit code is non-zero if any did.
// Extra arguments go to vitest (for example `pnpm test -t deadlock`).
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { packArgs, PACKAGES, removeBuilds, tarballPath } from './packages.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const extra = process.argv.slice(2);
const reports = mkdtempSync(join(tmpdir(), 'fenced-test-'));
/** The packed tarballs, made by the package checks and installed by the install step. */
const packs = mkdtempSync(join(tmpdir(), 'fenced-packed-'));
const bin = (name) => join(root, 'node_modules', '.bin', name);

/** Runs a command in the repository root with inherited output; returns its exit code. */
function run(command, args) {
  const result = spawnSync(command, args, { cwd: root, stdio: 'inherit' });
  return result.status ?? 1;
}

/** Runs one step and keeps its exit code and how long it took, for the summary. */
function step(name, command, args) {
  const from = performance.now();
  const code = run(command, args);
  steps.push({ name, code, seconds: Math.round((performance.now() - from) / 1000) });
  return code;
}

/** The first line of a failure message, trimmed to what a summary line can hold. */
function firstLine(message) {
  return String(message ?? '').split('\n')[0].slice(0, 300);
}

const steps = [];
const started = performance.now();

// First, and alone: without the services nothing else is worth the wait. The preflight prints the one
// line that says what to set.
if (run(process.execPath, ['--import', 'tsx', 'test/support/preflight.ts']) !== 0) process.exit(2);

step('generated modules', process.execPath, ['scripts/gen-assets.mjs', '--check']);

/**
 * Runs a command beside others: its output is held and printed whole when it ends (interleaved lines
 * from four tools would be unreadable); resolves with its exit code. `quietUnlessFailed`: its output
 * (a pack's list of files) is printed only when it fails.
 */
function heldOutput(name, command, args, cwd = root, { quietUnlessFailed = false } = {}) {
  return new Promise((resolveRun) => {
    const child = spawn(command, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    const output = [];
    child.stdout.on('data', (d) => output.push(d));
    child.stderr.on('data', (d) => output.push(d));
    const ended = (code) => {
      process.stdout.write(`\n== ${name}\n${quietUnlessFailed && code === 0 ? '' : Buffer.concat(output).toString()}`);
      resolveRun(code);
    };
    child.on('error', (err) => {
      output.push(Buffer.from(`${err.message}\n`));
      ended(1);
    });
    child.on('close', (code) => ended(code ?? 1));
  });
}

/** One step of the summary run beside others: `run` resolves with its exit code. */
async function sideStep(name, run) {
  const from = performance.now();
  const code = await run();
  steps.push({ name, code, seconds: Math.round((performance.now() - from) / 1000) });
}

/**
 * The packages as a consumer gets them: packed as they would be published, as a fresh clone packs
 * them (no `dist` first, so each tarball holds only what its own `prepack` built; each pack builds
 * its package, in dependency order: a package's build reads the declarations of those it imports),
 * then each tarball's exports map and types resolved the way Node (node16) and bundlers resolve them
 * (attw) and its package.json linted (publint), the ten checks side by side. Packed once, into
 * `packs`: attw and publint would each pack (and so build) every package again, and the install step
 * installs these same tarballs (FENCED_PACKED_DIR, see test/install/pack.ts). Resolves with 0 when
 * every package packed and passed.
 */
async function packageChecks() {
  removeBuilds(root);
  const packed = [];
  for (const pkg of PACKAGES) {
    if ((await heldOutput(`pack ${pkg}`, 'pnpm', packArgs(packs), join(root, 'packages', pkg), { quietUnlessFailed: true })) !== 0) break;
    packed.push(tarballPath(root, packs, pkg));
  }
  const checked = await Promise.all(
    packed.flatMap((tarball, i) => [
      heldOutput(`publint ${PACKAGES[i]}`, bin('publint'), ['run', tarball, '--strict']),
      heldOutput(`attw ${PACKAGES[i]}`, bin('attw'), [tarball, '--profile', 'esm-only', '--format', 'table-flipped']),
    ]),
  );
  // The install step installs these tarballs rather than packing again, when all five packed.
  if (packed.length === PACKAGES.length) process.env.FENCED_PACKED_DIR = packs;
  return packed.length === PACKAGES.length && checked.every((code) => code === 0) ? 0 : 1;
}

// These four read the sources and write nothing the others read, and none depends on timing: side
// by side they take the time of the longest on two cores (and beside other load the scheduler gives
// several processes more of the machine than one).
await Promise.all([
  sideStep('type check', () => heldOutput('type check', bin('tsc'), ['-p', 'tsconfig.json', '--noEmit'])),
  // The SDK supports ioredis 5 and 6: the same code type-checks against ioredis 6.0.0 too.
  sideStep('type check (ioredis 6)', () => heldOutput('type check (ioredis 6)', bin('tsc'), ['-p', 'tsconfig.ioredis6.json', '--noEmit'])),
  // The protocol, model-checked by SPIN within its bounds, and every classic bug's variant rejected.
  sideStep('model (SPIN)', () => heldOutput('model (SPIN)', process.execPath, ['--import', 'tsx', 'scripts/model/run-model.ts'])),
  sideStep('package checks (pack, publint, attw)', packageChecks),
]);

const counts = { passed: 0, failed: 0, skipped: 0 };
// Named again in the summary: CI shows the tail of the output, and the failure itself may be far above.
const failures = [];
// `ioredis6`: every test that talks to Redis, again on ioredis 6 (see vitest.config.ts), in a run of
// its own: run in the unit step's run, on the same workers, it saved 3 s quiet and cost 40-60 s
// beside four CPU hogs in fresh-clone CI (2026-12-06: 282 s against 224 + 61 s quiet; 462 and 488 s
// against 342 + 75 and 358 + 71 s beside hogs).
// `install`: the packages from their tarballs, installed by npm, pnpm and yarn into fresh projects.
// `unit-mocked`: the unit files that replace a module, isolated (see vitest.config.ts), in the unit
// step's run.
for (const [project, ...alongside] of [['unit', 'unit-mocked'], ['ioredis6'], ['install'], ['sim']]) {
  const report = join(reports, `${project}.json`);
  const projects = [project, ...alongside].flatMap((name) => ['--project', name]);
  const code = step(`${project} tests`, bin('vitest'), ['run', ...projects, '--reporter=default', '--reporter=json', `--outputFile.json=${report}`, ...extra]);
  try {
    const json = JSON.parse(readFileSync(report, 'utf8'));
    counts.passed += json.numPassedTests;
    counts.failed += json.numFailedTests;
    counts.skipped += json.numPendingTests + json.numTodoTests;
    for (const file of json.testResults) {
      const failedTests = file.assertionResults.filter((t) => t.status === 'failed');
      for (const t of failedTests) failures.push(`${project}: ${file.name.replace(root, '')} > ${t.fullName}: ${firstLine(t.failureMessages[0])}`);
      // A file that failed outside its tests (an import, a hook) has no failed test to name.
      if (failedTests.length === 0 && file.status === 'failed') failures.push(`${project}: ${file.name.replace(root, '')}: ${firstLine(file.message)}`);
    }
  } catch {
    // vitest did not get as far as writing its report: the step's exit code says it failed.
  }
}
rmSync(reports, { recursive: true, force: true });
rmSync(packs, { recursive: true, force: true });

const failed = steps.filter((s) => s.code !== 0);
process.stdout.write(`\npnpm test, ${Math.round((performance.now() - started) / 1000)} s:\n`);
for (const s of steps) process.stdout.write(`  ${s.code === 0 ? 'ok    ' : 'FAILED'} ${s.name} (${s.seconds} s)\n`);
for (const f of failures) process.stdout.write(`  failed: ${f}\n`);
process.stdout.write(`tests: ${counts.passed} passed, ${counts.failed} failed${counts.skipped > 0 ? `, ${counts.skipped} skipped` : ''}\n`);
process.exit(failed.length === 0 ? 0 : 1);
