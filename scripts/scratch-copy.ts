/**
 * The scratch copies that `pnpm mutants`, `pnpm mutate` and the simulation-against-bugs run plant
 * their bugs in, and the reading of the vitest report each one runs there.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { transformSync } from 'esbuild';

export const root = fileURLToPath(new URL('..', import.meta.url));

/**
 * Files the repository's own tests write beside the sources for a moment (the README's code blocks,
 * run as scripts): a copy made while such a test runs could list one and find it gone.
 */
const TRANSIENT = /^\.readme-block-.*\.mts$/;

/**
 * A copy of the repository in a new temporary folder, everything but its git history and the tests'
 * transient files: node_modules links are relative, so the copy resolves its packages on its own.
 */
export function scratchCopy(prefix: string): string {
  const scratch = mkdtempSync(join(tmpdir(), prefix));
  cpSync(root, scratch, { recursive: true, verbatimSymlinks: true, filter: (src) => !src.startsWith(join(root, '.git')) && !TRANSIENT.test(basename(src)) });
  return scratch;
}

/** A bug as text replaced in one file (scripts/mutants/planted-bugs.ts). */
export interface TextPatch {
  /** From the repository root. */
  readonly file: string;
  /** Must occur exactly once in the file. */
  readonly find: string;
  readonly replace: string;
}

/**
 * What the parser says of `code`, the text of the TypeScript file `file`, when it does not parse;
 * undefined when it does, or when the file is not TypeScript. A planted bug is the code with one
 * defect, and it runs: a planting that does not parse (its find matching code renamed since, say)
 * would fail every test that loads it, and count as caught.
 */
export function parseProblem(file: string, code: string): string | undefined {
  if (!file.endsWith('.ts')) return undefined;
  try {
    transformSync(code, { loader: 'ts', sourcefile: file });
    return undefined;
  } catch (error) {
    return (error as { errors?: Array<{ text: string }> }).errors?.[0]?.text ?? String(error);
  }
}

/**
 * Plants `patch` in the copy at `scratch`, regenerating the modules Lua and SQL reach the code
 * through. Returns why it does not apply (its text not there exactly once, the planted code does not
 * parse, the generation failed), or undefined once planted.
 */
export function plantIn(scratch: string, patch: TextPatch): string | undefined {
  const path = join(scratch, patch.file);
  const source = readFileSync(path, 'utf8');
  const count = source.split(patch.find).length - 1;
  if (count !== 1) return `the text to replace occurs ${count} times in ${patch.file}`;
  const planted = source.replace(patch.find, patch.replace);
  writeFileSync(path, planted);
  const unparsed = parseProblem(patch.file, planted);
  if (unparsed !== undefined) return `the planted code does not parse: ${unparsed}`;
  if (!/\.(lua|sql)$/.test(patch.file)) return undefined;
  const gen = spawnSync(process.execPath, ['scripts/gen-assets.mjs'], { cwd: scratch, encoding: 'utf8' });
  return gen.status === 0 ? undefined : `gen-assets failed: ${gen.stderr.slice(-300)}`;
}

/** What a vitest JSON report says of a run: its first failed test, or that every test passed, or that there is no report. */
export type TestVerdict = { readonly kind: 'failed'; readonly by: string } | { readonly kind: 'passed' } | { readonly kind: 'no report' };

/** The first failed test in vitest's JSON report at `report` (file › name, the file relative to `scratch`). */
export function firstFailure(report: string, scratch: string): TestVerdict {
  let json: { testResults: Array<{ name: string; status: string; message?: string; assertionResults: Array<{ status: string; fullName: string }> }> };
  try {
    json = JSON.parse(readFileSync(report, 'utf8'));
  } catch {
    return { kind: 'no report' };
  }
  for (const file of json.testResults) {
    const failed = file.assertionResults.find((a) => a.status === 'failed');
    if (failed !== undefined) return { kind: 'failed', by: `${relative(scratch, file.name)} › ${failed.fullName}` };
    if (file.status === 'failed') return { kind: 'failed', by: `${relative(scratch, file.name)} (failed to load: ${(file.message ?? '').split('\n')[0]})` };
  }
  return { kind: 'passed' };
}
