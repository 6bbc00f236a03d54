import { spawnSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));
const REPORT = join(root, 'reports', 'mutation', 'mutation.json');

interface StrykerReport {
  readonly files: Record<string, { readonly mutants: ReadonlyArray<{ readonly mutatorName: string; readonly replacement?: string; readonly status: string; readonly location: { readonly start: { readonly line: number } } }> }>;
}

/**
 * Runs StrykerJS on one TypeScript module (stryker.config.mjs), or on its `lines` (`60-134`), against
 * `tests` (none named: every unit test that imports it), and prints the survivors and the summary
 * line. Killed: a test failed, or timed out. Survived: every covering test passed, or no test
 * covered the mutant (both count against the module). Left out of the count: mutants that do not
 * compile or crash the runner (Stryker's CompileError and RuntimeError), and ignored ones.
 * @returns the exit code: 0 with no survivor.
 */
export function strykerOn(file: string, tests: readonly string[], lines?: string): number {
  const target = lines === undefined ? file : `${file}:${lines}`;
  const started = performance.now();
  rmSync(REPORT, { force: true });
  const run = spawnSync(join(root, 'node_modules', '.bin', 'stryker'), ['run', '--mutate', target], { cwd: root, stdio: ['ignore', 'inherit', 'inherit'], env: { ...process.env, CI: 'true', FENCED_MUTATE_TESTS: tests.join(',') } });
  let report: StrykerReport;
  try {
    report = JSON.parse(readFileSync(REPORT, 'utf8')) as StrykerReport;
  } catch {
    process.stderr.write(`mutate: StrykerJS wrote no report (exit ${run.status}): see its output above\n`);
    return 2;
  }
  const mutants = Object.values(report.files).flatMap((f) => f.mutants);
  const counted = mutants.filter((m) => ['Killed', 'Timeout', 'Survived', 'NoCoverage'].includes(m.status));
  const killed = counted.filter((m) => m.status === 'Killed' || m.status === 'Timeout').length;
  const survivors = counted.filter((m) => m.status === 'Survived' || m.status === 'NoCoverage');
  for (const m of survivors) process.stdout.write(`survived: ${file} line ${m.location.start.line}: ${m.mutatorName} → ${(m.replacement ?? '').replace(/\s+/g, ' ').slice(0, 100)}${m.status === 'NoCoverage' ? ' (no test covers it)' : ''}\n`);
  const percent = counted.length === 0 ? 100 : Math.round((killed / counted.length) * 100);
  process.stdout.write(`mutate: ${target}: ${counted.length} mutants, ${killed} killed, ${survivors.length} survived (${percent} % killed) in ${Math.round((performance.now() - started) / 1000)} s\n`);
  return survivors.length === 0 ? 0 : 1;
}
