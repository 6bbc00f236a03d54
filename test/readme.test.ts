import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { COLUMN_DEFINITIONS } from '@fenced/chaos';
import { describe, expect, it } from 'vitest';

const readme = readFileSync(fileURLToPath(new URL('../README.md', import.meta.url)), 'utf8');

describe('the README', () => {
  it('defines every column of the simulation table as pnpm sim --help does', () => {
    for (const [column, meaning] of COLUMN_DEFINITIONS) expect(readme).toContain(`| \`${column}\` | ${meaning} |`);
  });

  it('points at no file outside the repository', () => {
    expect(readme).not.toMatch(/\.\.\/shared\/|FENCING-MODEL|CONVENTIONS\.md/);
  });
});
