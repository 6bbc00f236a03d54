// `pnpm mutants` is too long for `pnpm test`, but its bugs must keep applying to the code as it
// changes, and its list in the docs must stay whole: both are checked here, in milliseconds.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { PLANTED_BUGS } from '../../scripts/mutants/planted-bugs.js';
import { parseProblem, plantIn } from '../../scripts/scratch-copy.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const docs = readFileSync(`${root}/docs/planted-bugs.md`, 'utf8');

describe('the planted bugs of pnpm mutants', () => {
  it.each(PLANTED_BUGS.map((b) => [b.id, b] as const))('%s still applies: its text occurs exactly once, the patch changes it, and the planted code parses', (_id, bug) => {
    const source = readFileSync(`${root}/${bug.file}`, 'utf8');
    expect(source.split(bug.find).length - 1).toBe(1);
    expect(bug.replace).not.toBe(bug.find);
    for (const test of bug.tests) expect(() => readFileSync(`${root}/${test}`), test).not.toThrow();
    // A planting that does not parse fails every test that loads it, and would count as caught (one
    // did, after the code it replaced was renamed).
    expect(parseProblem(bug.file, source.replace(bug.find, bug.replace))).toBeUndefined();
  });

  it('a planting that does not parse is refused by the runner, with what the parser said', () => {
    const scratch = mkdtempSync(join(tmpdir(), 'fenced-plant-'));
    try {
      mkdirSync(join(scratch, 'src'));
      const original = 'export class A {\n  #listen() {}\n  start() {\n    this.#listen();\n  }\n}\n';
      writeFileSync(join(scratch, 'src/a.ts'), original);
      expect(plantIn(scratch, { file: 'src/a.ts', find: 'this.#listen();', replace: 'this.#subscribe();' })).toBe('the planted code does not parse: Private name "#subscribe" must be declared in an enclosing class');
      writeFileSync(join(scratch, 'src/a.ts'), original);
      expect(plantIn(scratch, { file: 'src/a.ts', find: '  #listen() {}', replace: '  #listen() {\n    return 1;\n  }' })).toBeUndefined();
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
  });

  it('are listed in docs/planted-bugs.md, each with its layer', () => {
    for (const bug of PLANTED_BUGS) expect(docs).toMatch(new RegExp(`^\\| \`${bug.id}\` \\| ${bug.layer} \\|`, 'm'));
    expect(new Set(PLANTED_BUGS.map((b) => b.id)).size).toBe(PLANTED_BUGS.length);
  });
});
