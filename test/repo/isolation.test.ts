import { readdirSync, readFileSync } from 'node:fs';
import { join, matchesGlob, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import config from '../../vitest.config.js';

const root = fileURLToPath(new URL('../..', import.meta.url));

/** Every test file of the repository, relative to its root. */
function testFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    if (entry.name === 'node_modules' || entry.name.startsWith('.')) return [];
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return testFiles(path);
    return entry.name.endsWith('.test.ts') ? [relative(root, path)] : [];
  });
}

interface ProjectTest {
  readonly name?: string;
  readonly include?: string[];
  readonly exclude?: string[];
  readonly isolate?: boolean;
}

const projects = (config.test?.projects ?? []).flatMap((p) => (typeof p === 'object' && 'test' in p && p.test !== undefined ? [p.test as ProjectTest] : []));

function project(name: string): ProjectTest {
  const found = projects.find((p) => p.name === name);
  if (found === undefined) throw new Error(`vitest.config.ts has no project ${name}`);
  return found;
}

/** Whether `project` runs `file`: an include matches it and no exclude does. */
function runs(p: ProjectTest, file: string): boolean {
  return (p.include ?? []).some((glob) => matchesGlob(file, glob)) && !(p.exclude ?? []).some((glob) => matchesGlob(file, glob));
}

describe('the unit project shares modules between files', () => {
  it('so every file that replaces a module (vi.mock) runs in the isolated unit-mocked project', () => {
    // A vi.mock in a file of the shared project would hand its copy to the files after it in the same
    // worker, or miss a module they loaded first: the counts or behaviours it checks would be wrong.
    const mocking = testFiles(root).filter((file) => /\bvi\.(do)?mock\(/.test(readFileSync(join(root, file), 'utf8')));
    expect(mocking.length).toBeGreaterThan(0);
    expect(project('unit').isolate).toBe(false);
    expect(project('unit-mocked').isolate).not.toBe(false);
    for (const file of mocking) {
      const sharing = projects.filter((p) => p.isolate === false && runs(p, file)).map((p) => p.name);
      expect(sharing, `${file} replaces a module: it must run isolated`).toEqual([]);
    }
    expect(runs(project('unit-mocked'), 'test/repo/token-parse-count.test.ts')).toBe(true);
    expect(runs(project('unit'), 'test/repo/token-parse-count.test.ts')).toBe(false);
  });
});
