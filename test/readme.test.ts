import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { COLUMN_DEFINITIONS } from '@fenced/chaos';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('..', import.meta.url));
const readme = readFileSync(resolve(root, 'README.md'), 'utf8');

describe('the README', () => {
  it('defines every column of the simulation table as pnpm sim --help does', () => {
    for (const [column, meaning] of COLUMN_DEFINITIONS) expect(readme).toContain(`| \`${column}\` | ${meaning} |`);
  });

  it('links only to files inside the repository, and each one exists', () => {
    const links = [...readme.matchAll(/\]\(([^)#\s]+)[^)]*\)/g)].map((m) => m[1]!).filter((target) => !/^[a-z]+:/.test(target));
    expect(links.length).toBeGreaterThan(0);
    for (const target of links) {
      const path = resolve(root, target);
      expect(path.startsWith(root), target).toBe(true);
      expect(existsSync(path), target).toBe(true);
    }
  });
});
