// `pnpm mutants` is too long for `pnpm test`, but its bugs must keep applying to the code as it
// changes, and its list in the docs must stay whole: both are checked here, in milliseconds.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { PLANTED_BUGS } from '../../scripts/mutants/planted-bugs.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const docs = readFileSync(`${root}/docs/planted-bugs.md`, 'utf8');

describe('the planted bugs of pnpm mutants', () => {
  it.each(PLANTED_BUGS.map((b) => [b.id, b] as const))('%s still applies: its text occurs exactly once, and the patch changes it', (_id, bug) => {
    const source = readFileSync(`${root}/${bug.file}`, 'utf8');
    expect(source.split(bug.find).length - 1).toBe(1);
    expect(bug.replace).not.toBe(bug.find);
    for (const test of bug.tests) expect(() => readFileSync(`${root}/${test}`), test).not.toThrow();
  });

  it('are listed in docs/planted-bugs.md, each with its layer', () => {
    for (const bug of PLANTED_BUGS) expect(docs).toMatch(new RegExp(`^\\| \`${bug.id}\` \\| ${bug.layer} \\|`, 'm'));
    expect(new Set(PLANTED_BUGS.map((b) => b.id)).size).toBe(PLANTED_BUGS.length);
  });
});
