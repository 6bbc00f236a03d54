import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { COLUMN_DEFINITIONS, leaseStoresOf, scenarios, scenariosOf } from '@fenced/chaos';
import { ledgerApp } from '../../examples/ledger-sim/app.js';
import { createTestSchema } from '#test-support';
import { markdownFiles } from '../support/doc-blocks.js';
import { describe, expect, it } from 'vitest';

// Every document of the repository is held to what it claims: its links lead to files (and headings)
// that exist inside the repository, the pnpm scripts it tells you to run exist, and a code block
// marked `ts run` runs as it is.
const root = fileURLToPath(new URL('../..', import.meta.url));

const docs = [...markdownFiles(root)].filter((f) => !relative(root, f).startsWith('.changeset/') || f.endsWith('README.md'));
const text = (file: string) => readFileSync(file, 'utf8');

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens. */
const slug = (heading: string) =>
  heading
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');
const anchors = (file: string) => new Set([...text(file).matchAll(/^#{1,6} (.+)$/gm)].map((m) => slug(m[1]!)));

/** The fenced code blocks of a document, with their info string. */
function codeBlocks(markdown: string): Array<{ info: string; body: string }> {
  return [...markdown.matchAll(/^```([^\n]*)\n([\s\S]*?)^```$/gm)].map((m) => ({ info: m[1]!.trim(), body: m[2]! }));
}

describe('the documents', () => {
  it('are the front README, the docs and a README per published package', () => {
    const names = docs.map((f) => relative(root, f));
    for (const expected of ['README.md', 'docs/fencing-model.md', 'docs/simulation.md', 'docs/operating.md', 'docs/benchmarks.md', 'docs/planted-bugs.md']) expect(names).toContain(expected);
    for (const pkg of readdirSync(join(root, 'packages'))) expect(names, `packages/${pkg} has no README`).toContain(`packages/${pkg}/README.md`);
    // The front door stays a front door.
    expect(text(join(root, 'README.md')).split('\n').length).toBeLessThan(150);
  });

  it('link only to files inside the repository that exist, and to headings those files have', () => {
    const broken: string[] = [];
    let checked = 0;
    for (const file of docs) {
      for (const m of text(file).matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = m[1]!;
        if (/^[a-z]+:/.test(target)) continue;
        checked++;
        const [path, anchor] = target.split('#') as [string, string | undefined];
        const resolved = path === '' ? file : resolve(dirname(file), path);
        const where = `${relative(root, file)} -> ${target}`;
        if (!resolved.startsWith(root)) broken.push(`${where}: outside the repository`);
        else if (!existsSync(resolved)) broken.push(`${where}: no such file`);
        else if (anchor !== undefined && resolved.endsWith('.md') && !anchors(resolved).has(anchor)) broken.push(`${where}: no such heading`);
      }
    }
    expect(checked).toBeGreaterThan(20);
    expect(broken).toEqual([]);
  });

  it('tell you to run only pnpm scripts that exist', () => {
    const scripts = Object.keys((JSON.parse(text(join(root, 'package.json'))) as { scripts: Record<string, string> }).scripts);
    // pnpm's own commands a document may show.
    const builtins = ['install', 'add', 'exec', 'dlx', '-r', '--filter', 'pack', 'changeset'];
    const unknown: string[] = [];
    for (const file of docs) {
      for (const block of codeBlocks(text(file)).filter((b) => b.info === 'sh' || b.info === 'bash')) {
        for (const m of block.body.matchAll(/(?:^|&&\s*|;\s*)pnpm (?:--reporter \S+ )?([\w:.-]+)/gm)) {
          const name = m[1]!;
          if (!scripts.includes(name) && !builtins.includes(name)) unknown.push(`${relative(root, file)}: pnpm ${name}`);
        }
      }
    }
    expect(unknown).toEqual([]);
  });

  it('run every code block marked `ts run`, as it is', async () => {
    const runnable = docs.flatMap((file) => codeBlocks(text(file)).filter((b) => b.info === 'ts run').map((b) => ({ file, body: b.body })));
    expect(runnable.length).toBeGreaterThan(0);
    const { name: schema, drop } = await createTestSchema('readme');
    try {
      for (const [i, { file, body }] of runnable.entries()) {
        // Beside the workspace's node_modules, so its imports resolve as a user's would.
        const script = join(root, `.readme-block-${process.pid}-${i}.mts`);
        writeFileSync(script, body);
        try {
          const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', '--conditions=@fenced/source', script], {
            cwd: root,
            env: { ...process.env, FENCED_SCHEMA: schema },
            timeout: 60_000,
          });
          expect(stdout, relative(root, file)).not.toBe('');
        } finally {
          rmSync(script, { force: true });
        }
      }
    } finally {
      await drop();
    }
  });

  it("count the scenarios pnpm sim runs as it runs them: by default, and with --lease-store postgres (a regression: the README said 6 where the flag runs 13)", () => {
    const readme = text(join(root, 'README.md'));
    const onStore = (store: 'redis' | 'postgres' | 'etcd', which: 'default' | 'possible') => scenariosOf(ledgerApp).filter((s) => leaseStoresOf(scenarios[s])[which].includes(store)).length;
    expect(readme).toContain(`(${onStore('redis', 'default')} scenarios on Redis, ${onStore('postgres', 'default')} on the PostgreSQL lease store`);
    expect(readme).toContain(`\`--lease-store postgres\` runs all ${onStore('postgres', 'possible')} that run there`);
  });

  it('define every column of the simulation table as pnpm sim --help does', () => {
    const simulation = text(join(root, 'docs/simulation.md'));
    for (const [column, meaning] of COLUMN_DEFINITIONS) expect(simulation).toContain(`| \`${column}\` | ${meaning} |`);
  });
});
