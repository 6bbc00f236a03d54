import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';

// The layering of the workspace, as rules over the import graph of every source file (tests
// included: a test of a package may not reach into a package its code may not use either).
//   shared                       the wire contract: imports no other fenced package
//   coordinator, consumer-guard  side by side: each imports shared, never the other
//   chaos                        the fault toolkit: imports no fenced package at all
//   cli                          the operators' command line, on top: the libraries, never chaos
// and no package imports from examples/ or test/, nor reaches into another package by a relative path.
// Inside a package, a store is one folder behind a seam: only the package's entry names a store
// (createCoordinator's and createGuard's defaults), no store imports another, and none imports the
// state machines above it.
// A package's tests and benchmarks may also use chaos, the test toolkit (it imports none of them, so
// no cycle can form); its shipped code may not.
const root = fileURLToPath(new URL('../..', import.meta.url));
const allowed: Record<string, readonly string[]> = {
  shared: [],
  coordinator: ['shared'],
  'consumer-guard': ['shared'],
  chaos: [],
  cli: ['shared', 'coordinator', 'consumer-guard'],
};

/**
 * Files the tests below plant (absolute path to text) to show each rule fails on its violation: seen
 * by the rules as if they were in the tree, never written to it.
 */
const planted = new Map<string, string>();

function* sourceFiles(dir: string): Generator<string> {
  for (const entry of existsSync(dir) ? readdirSync(dir) : []) {
    const full = join(dir, entry);
    if (entry === 'node_modules' || entry === 'dist') continue;
    if (statSync(full).isDirectory()) yield* sourceFiles(full);
    else if (full.endsWith('.ts')) yield full;
  }
  for (const file of planted.keys()) if (dirname(file) === dir) yield file;
}

function textOf(file: string): string {
  return planted.get(file) ?? readFileSync(file, 'utf8');
}

/** The folders directly under `dir` (planted ones included). */
function foldersIn(dir: string): string[] {
  const found = new Set(readdirSync(join(root, dir)).filter((entry) => statSync(join(root, dir, entry)).isDirectory()));
  for (const file of planted.keys()) {
    const rel = relative(join(root, dir), file).split('/');
    if (rel.length > 1 && rel[0] !== '..') found.add(rel[0]!);
  }
  return [...found].sort().map((name) => `${dir}/${name}`);
}

/** Every module specifier a file imports or re-exports (static and dynamic). */
function specifiers(text: string): string[] {
  const found = new Set<string>();
  for (const m of text.matchAll(/(?:^|[\s;])(?:import|export)\s[^'"`;]*?from\s*['"]([^'"]+)['"]/g)) found.add(m[1]!);
  for (const m of text.matchAll(/(?:^|[\s;])import\s*['"]([^'"]+)['"]/g)) found.add(m[1]!);
  for (const m of text.matchAll(/import\(\s*['"]([^'"]+)['"]\s*\)/g)) found.add(m[1]!);
  return [...found];
}

/**
 * The store folders of each package. A lease store is every folder under coordinator/src/store (the
 * seam files beside them): each holds every role of its store, its lease, fire log, membership and
 * scripts. The fence stores are folders of consumer-guard/src beside the guard core.
 */
const leaseStoreFolders = (): string[] => foldersIn('packages/coordinator/src/store');
const fenceStoreFolders = ['packages/consumer-guard/src/postgres', 'packages/consumer-guard/src/mysql', 'packages/consumer-guard/src/redis', 'packages/consumer-guard/src/memory'];

/** Every pair of the folders. */
function pairsOf(folders: readonly string[]): Array<readonly [string, string]> {
  return folders.flatMap((a, i) => folders.slice(i + 1).map((b) => [a, b] as const));
}

/**
 * Folders of one package that may not import each other: each store is a folder of its own, and what
 * two stores share lives beside them (the seam, src/sql), not in one of them.
 */
const separated = (): ReadonlyArray<readonly [string, string]> => [...pairsOf(fenceStoreFolders), ...pairsOf(leaseStoreFolders())];

/**
 * What may name a store: only a package's entry (`createCoordinator({ redis })`, `createGuard({ db })`
 * resolve their default store there) and the stores themselves. The coordinator's state machines
 * take a `LeaseBackend`, the guard core a `FenceStore`, and import no store folder, types included.
 */
const storeFree: ReadonlyArray<{ readonly files: () => string[]; readonly stores: () => readonly string[]; readonly what: string }> = [
  {
    what: 'a state machine of the coordinator',
    files: () => ['lease', 'scheduler', 'lease-group', 'metrics', 'internal'].flatMap((d) => [...sourceFiles(join(root, 'packages/coordinator/src', d))]),
    stores: leaseStoreFolders,
  },
  {
    what: 'the guard core',
    files: () =>
      [...sourceFiles(join(root, 'packages/consumer-guard/src'))].filter((file) => {
        const where = relative(root, file);
        const entry = where === 'packages/consumer-guard/src/create-guard.ts' || where === 'packages/consumer-guard/src/index.ts';
        return !entry && !fenceStoreFolders.some((store) => where.startsWith(store + '/'));
      }),
    stores: () => fenceStoreFolders,
  },
];

function storeNamingViolations(): string[] {
  const out: string[] = [];
  for (const rule of storeFree) {
    const stores = rule.stores();
    for (const file of rule.files()) {
      if (file.includes('.test.')) continue;
      for (const spec of specifiers(textOf(file))) {
        if (!spec.startsWith('.')) continue;
        const target = resolve(dirname(file), spec);
        const store = stores.find((s) => target.startsWith(join(root, s) + '/'));
        if (store !== undefined) out.push(`${relative(root, file)} (${rule.what}) imports ${spec} (the store ${store})`);
      }
    }
  }
  return out;
}

/**
 * Inside a package, layers that import only downward: the folder (or file) on the left never imports
 * the one on the right, types included. The guard imports nothing of the handler layer built on it,
 * the stores nothing of the guard that composes them, the HTTP route no store (it runs over any),
 * what the SQL stores share (src/sql) nothing of either, the checker nothing of the simulation it
 * judges, and the faults nothing of the rounds that schedule them.
 */
const downward: ReadonlyArray<readonly [from: string, mustNotImport: string]> = [
  ['packages/consumer-guard/src/combined-guard.ts', 'packages/consumer-guard/src/handler'],
  ['packages/consumer-guard/src/combined-guard.ts', 'packages/consumer-guard/src/queues'],
  ['packages/consumer-guard/src/postgres', 'packages/consumer-guard/src/handler'],
  ['packages/consumer-guard/src/redis', 'packages/consumer-guard/src/handler'],
  ['packages/consumer-guard/src/postgres', 'packages/consumer-guard/src/combined-guard.ts'],
  ['packages/consumer-guard/src/redis', 'packages/consumer-guard/src/combined-guard.ts'],
  ['packages/consumer-guard/src/handler', 'packages/consumer-guard/src/postgres'],
  ['packages/consumer-guard/src/handler', 'packages/consumer-guard/src/redis'],
  ['packages/consumer-guard/src/handler', 'packages/consumer-guard/src/mysql'],
  ['packages/consumer-guard/src/mysql', 'packages/consumer-guard/src/handler'],
  ['packages/consumer-guard/src/mysql', 'packages/consumer-guard/src/combined-guard.ts'],
  ['packages/consumer-guard/src/memory', 'packages/consumer-guard/src/handler'],
  ['packages/consumer-guard/src/memory', 'packages/consumer-guard/src/combined-guard.ts'],
  ['packages/consumer-guard/src/http', 'packages/consumer-guard/src/postgres'],
  ['packages/consumer-guard/src/http', 'packages/consumer-guard/src/mysql'],
  ['packages/consumer-guard/src/sql', 'packages/consumer-guard/src/postgres'],
  ['packages/consumer-guard/src/sql', 'packages/consumer-guard/src/mysql'],
  ['packages/coordinator/src/store', 'packages/coordinator/src/lease'],
  ['packages/coordinator/src/store', 'packages/coordinator/src/scheduler'],
  ['packages/coordinator/src/store', 'packages/coordinator/src/lease-group'],
  ['packages/coordinator/src/store', 'packages/coordinator/src/create.ts'],
  ['packages/coordinator/src/store', 'packages/coordinator/src/index.ts'],
  ['packages/chaos/src/checker', 'packages/chaos/src/sim'],
  ['packages/chaos/src/checker', 'packages/chaos/src/report'],
  ['packages/chaos/src/sim/faults', 'packages/chaos/src/sim/fault-rounds.ts'],
  ['packages/chaos/src/sim/faults', 'packages/chaos/src/sim/scenarios.ts'],
];

function downwardViolations(): string[] {
  const out: string[] = [];
  for (const [from, to] of downward) {
    const fromPath = join(root, from);
    const sources = fromPath.endsWith('.ts') ? [fromPath] : [...sourceFiles(fromPath)].filter((f) => !f.includes('.test.'));
    for (const file of sources) {
      for (const spec of specifiers(textOf(file))) {
        if (!spec.startsWith('.')) continue;
        const target = resolve(dirname(file), spec).replace(/\.js$/, '.ts');
        const forbidden = join(root, to);
        if (target === forbidden || target.startsWith(forbidden + '/')) out.push(`${relative(root, file)} imports ${spec} (${to} is above it)`);
      }
    }
  }
  return out;
}

/** Every import cycle between the shipped files of a package, type-only imports included. */
function importCycles(): string[] {
  const graph = new Map<string, string[]>();
  for (const pkg of Object.keys(allowed)) {
    for (const file of sourceFiles(join(root, 'packages', pkg, 'src'))) {
      if (file.includes('.test.')) continue;
      const deps = specifiers(textOf(file))
        .filter((spec) => spec.startsWith('.'))
        .map((spec) => resolve(dirname(file), spec).replace(/\.js$/, '.ts'));
      graph.set(file, deps);
    }
  }
  const cycles: string[] = [];
  const done = new Set<string>();
  const path: string[] = [];
  const onPath = new Set<string>();
  const visit = (file: string) => {
    done.add(file);
    onPath.add(file);
    path.push(file);
    for (const dep of graph.get(file) ?? []) {
      if (!graph.has(dep)) continue;
      if (onPath.has(dep)) cycles.push([...path.slice(path.indexOf(dep)), dep].map((f) => relative(root, f)).join(' -> '));
      else if (!done.has(dep)) visit(dep);
    }
    path.pop();
    onPath.delete(file);
  };
  for (const file of graph.keys()) if (!done.has(file)) visit(file);
  return cycles;
}

function folderViolations(): string[] {
  const out: string[] = [];
  for (const pair of separated()) {
    for (const [from, to] of [pair, [pair[1], pair[0]] as const]) {
      for (const file of sourceFiles(join(root, from))) {
        for (const spec of specifiers(textOf(file))) {
          if (spec.startsWith('.') && resolve(dirname(file), spec).startsWith(join(root, to) + '/')) out.push(`${relative(root, file)} imports ${spec} (from ${to})`);
        }
      }
    }
  }
  return out;
}

function violations(): string[] {
  const out: string[] = [];
  for (const pkg of Object.keys(allowed)) {
    const pkgRoot = join(root, 'packages', pkg);
    for (const file of sourceFiles(pkgRoot)) {
      const where = relative(root, file);
      for (const spec of specifiers(textOf(file))) {
        const fenced = /^@fenced\/([^/]+)/.exec(spec);
        if (fenced !== null) {
          const testing = file.includes('.test.') || where.includes('/bench/');
          const ok = fenced[1] === pkg || allowed[pkg]!.includes(fenced[1]!) || (testing && fenced[1] === 'chaos');
          if (!ok) out.push(`${where} imports ${spec}`);
          continue;
        }
        if (spec === '#test-support') {
          if (pkg !== 'chaos' && !file.includes('.test.')) out.push(`${where} imports the test support outside a test`);
          continue;
        }
        if (spec.startsWith('.')) {
          const target = resolve(dirname(file), spec);
          if (!target.startsWith(pkgRoot + '/')) out.push(`${where} reaches outside its package: ${spec}`);
        }
      }
    }
  }
  return out;
}

describe('the layering of the workspace', () => {
  it('holds for every source file', () => {
    expect(violations()).toEqual([]);
  });

  it('keeps every store apart: no import between two fence-store folders of consumer-guard, nor between two lease-store folders under coordinator/src/store (what two share lives in the seam beside them)', () => {
    expect(leaseStoreFolders().length).toBeGreaterThanOrEqual(3);
    expect(folderViolations()).toEqual([]);
  });

  it('keeps the state machines and the guard core free of stores: only the entry (create.ts, create-guard.ts) names one', () => {
    expect(storeNamingViolations()).toEqual([]);
  });

  it('keeps the layers inside a package pointing down: guard below handler, stores below guard, checker below simulation, faults below rounds', () => {
    expect(downwardViolations()).toEqual([]);
  });

  it('has no import cycle between the files of a package, type-only imports included', () => {
    expect(importCycles()).toEqual([]);
  });

  describe('fails on a planted violation of each rule', () => {
    const plant = (path: string, text: string) => planted.set(join(root, path), text);
    afterEach(() => planted.clear());

    it('a state machine of the coordinator that imports a store', () => {
      plant('packages/coordinator/src/lease/planted.ts', "import { redisLeases } from '../store/redis/redis-backend.js';\n");
      expect(storeNamingViolations()).toEqual(['packages/coordinator/src/lease/planted.ts (a state machine of the coordinator) imports ../store/redis/redis-backend.js (the store packages/coordinator/src/store/redis)']);
    });

    it('the guard core that imports a fence store, a type only', () => {
      plant('packages/consumer-guard/src/handler/planted.ts', "import type { PostgresStore } from '../postgres/postgres-store.js';\n");
      expect(storeNamingViolations()).toHaveLength(1);
    });

    it('two lease stores that import each other, a store added later included', () => {
      plant('packages/coordinator/src/store/postgres/planted.ts', "import { leaseKeys } from '../redis/lease-keys.js';\n");
      plant('packages/coordinator/src/store/memory/planted.ts', "export { etcdKey } from '../etcd/etcd-keys.js';\n");
      expect(folderViolations()).toEqual([
        'packages/coordinator/src/store/memory/planted.ts imports ../etcd/etcd-keys.js (from packages/coordinator/src/store/etcd)',
        'packages/coordinator/src/store/postgres/planted.ts imports ../redis/lease-keys.js (from packages/coordinator/src/store/redis)',
      ]);
    });

    it('a store that imports a state machine', () => {
      plant('packages/coordinator/src/store/etcd/planted.ts', "import type { Scheduler } from '../../scheduler/scheduler.js';\n");
      expect(downwardViolations()).toEqual(['packages/coordinator/src/store/etcd/planted.ts imports ../../scheduler/scheduler.js (packages/coordinator/src/scheduler is above it)']);
    });
  });

  it('would be caught: the parser sees each form of import', () => {
    expect(specifiers(`import { a } from '@fenced/coordinator';\nexport * from "./x.js";\nimport './side.js';\nconst m = await import('@fenced/chaos');\nimport type {\n  T,\n} from '@fenced/consumer-guard';`).sort()).toEqual(
      ['./side.js', './x.js', '@fenced/chaos', '@fenced/consumer-guard', '@fenced/coordinator'],
    );
  });
});
