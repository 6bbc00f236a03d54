import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { configDefaults, defineConfig } from 'vitest/config';
import base from './vitest.config.js';

// The unit project alone, for StrykerJS (`pnpm mutate --module <file.ts>`): its vitest runner runs
// one configuration, not a workspace of projects. Everything comes from vitest.config.ts: its
// resolution, services and setup, and the unit project's files and environment. `pnpm mutate --tests
// a,b` narrows the files to those named (FENCED_MUTATE_TESTS, set for the modules run-mutate.ts
// lists): the tests that cover a module, where vitest's related files would guess from imports.
//
// Stryker mutates a copy of the repository (its sandbox) whose node_modules is a link to the
// repository's: an import by package name (`@fenced/consumer-guard/memory`) would leave the sandbox
// for the unmutated source, and a mutant would reach only the tests that import it by relative path.
// Every workspace package's entry points therefore resolve to the source beside this file.
const here = fileURLToPath(new URL('.', import.meta.url));
const packageEntries = readdirSync(`${here}packages`).flatMap((dir) => {
  const manifest = JSON.parse(readFileSync(`${here}packages/${dir}/package.json`, 'utf8')) as { name: string; exports?: Record<string, string | Record<string, string>> };
  return Object.entries(manifest.exports ?? {}).flatMap(([subpath, target]) => {
    const source = typeof target === 'object' ? target['@fenced/source'] : undefined;
    if (source === undefined) return [];
    const specifier = subpath === '.' ? manifest.name : `${manifest.name}${subpath.slice(1)}`;
    return [{ find: new RegExp(`^${specifier.replace(/[/.-]/g, (c) => `\\${c}`)}$`), replacement: `${here}packages/${dir}/${source.replace(/^\.\//, '')}` }];
  });
});
const baseAliases = Object.entries((base.resolve?.alias ?? {}) as Record<string, string>).map(([find, replacement]) => ({ find, replacement }));
const unit = base.test?.projects?.find((project) => typeof project === 'object' && 'test' in project && project.test?.name === 'unit');
if (unit === undefined || typeof unit !== 'object' || !('test' in unit) || unit.test === undefined) throw new Error('vitest.config.ts has no unit project');
const { projects: _projects, ...shared } = base.test ?? {};

const named = process.env['FENCED_MUTATE_TESTS']?.split(',').filter((test) => test !== '');

export default defineConfig({
  ...base,
  resolve: { ...base.resolve, alias: [...packageEntries, ...baseAliases] },
  // Isolated, as every mutation figure in docs/planted-bugs.md was measured: a mutant's module state
  // stays in its file.
  test: { ...shared, ...unit.test, isolate: true, ...(named === undefined || named.length === 0 ? {} : { include: named }), exclude: [...(unit.test.exclude ?? configDefaults.exclude), '.stryker-tmp/**'] },
});
