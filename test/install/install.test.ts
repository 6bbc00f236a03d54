/**
 * The install path a user takes before anything is published: the five packages packed as tarballs,
 * installed into a fresh project by npm, pnpm and yarn (no overrides, no workspace), a strict
 * TypeScript app compiled against them (`node16` and `bundler` resolution, `skipLibCheck: false`)
 * and run against the local services, on ioredis 6 and then 5. Also a service on PostgreSQL alone,
 * without Redis or Kysely installed, every TypeScript block of the documents compiled the same way
 * (beside the libraries they show, the reader's own objects declared in app/src/docs/context.ts), and
 * `npm publish --dry-run` of every tarball.
 *
 * A broken `exports` map, a file missing from `files`, a `workspace:` range that leaked into a
 * tarball, a wrong peer range or a declaration file importing an optional peer fails here. The
 * package managers' own caches (npm's, pnpm's store, yarn's global cache) keep the reinstalls fast.
 */
import { execFile } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { randomBytes } from 'node:crypto';
import { createPool, createRedis, deleteKeys, isStopped, spawnNode, testDatabaseUrl, testRedisUrl, waitFor, type ChildHandle } from '#test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packAll, PACKAGES, repoRoot, type PackageDir } from './pack.js';
import { typescriptBlocks } from '../support/doc-blocks.js';

const run = promisify(execFile);
const INSTALL_TIMEOUT_MS = 600_000;

/** The environment of a command run as a user would: nothing of this pnpm run or vitest leaks in. */
const userEnv: NodeJS.ProcessEnv = Object.fromEntries(
  Object.entries(process.env).filter(([key]) => !/^(npm_|pnpm_|yarn_|INIT_CWD$|NODE_OPTIONS$|NODE_ENV$|VITEST|TEST$|PNPM_)/i.test(key)),
);

/** The versions this repository is tested with, read from its own install (so the caches hit). */
const installed = (name: string, from = repoRoot): string =>
  (JSON.parse(readFileSync(join(from, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version;
const versions = {
  ioredis5: installed('ioredis'),
  ioredis6: installed('ioredis6'),
  kysely: installed('kysely'),
  pg: installed('pg'),
  typesPg: installed('@types/pg'),
  typesNode: installed('@types/node'),
};

type Manager = 'npm' | 'pnpm' | 'yarn';
const yarnJs = join(repoRoot, 'node_modules', '@yarnpkg', 'cli-dist', 'bin', 'yarn.js');
const tsc = join(repoRoot, 'node_modules', 'typescript', 'bin', 'tsc');

let tarballs: Record<PackageDir, string>;
const projects: string[] = [];

beforeAll(() => {
  tarballs = packAll(userEnv);
}, INSTALL_TIMEOUT_MS);
afterAll(() => {
  for (const dir of projects) rmSync(dir, { recursive: true, force: true });
});

/** A fresh project folder holding the fixture app's sources and tsconfigs, and `dependencies`. */
function newProject(dependencies: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'fenced-install-'));
  projects.push(dir);
  cpSync(join(repoRoot, 'test', 'install', 'app'), dir, { recursive: true });
  writeFileSync(join(dir, 'package.json'), `${JSON.stringify({ name: 'fenced-install-check', version: '1.0.0', private: true, type: 'module', dependencies }, null, 2)}\n`);
  return dir;
}

function sdk(packages: readonly PackageDir[]): Record<string, string> {
  return Object.fromEntries(packages.map((pkg) => [`@fenced/${pkg}`, `file:${tarballs[pkg]}`]));
}

/** Every package, on ioredis 6, Kysely and pg: the dependencies of the fixture's main app. */
function fullApp(): Record<string, string> {
  return { ...sdk(PACKAGES), ioredis: versions.ioredis6, kysely: versions.kysely, pg: versions.pg, '@types/pg': versions.typesPg, '@types/node': versions.typesNode };
}

async function install(manager: Manager, dir: string): Promise<void> {
  try {
    if (manager === 'npm') {
      await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: dir, env: userEnv });
    } else if (manager === 'pnpm') {
      // A fresh project has no lockfile; on CI pnpm would insist on a frozen one.
      await run('pnpm', ['install', '--no-frozen-lockfile', '--prefer-offline', '--reporter', 'silent'], { cwd: dir, env: userEnv });
    } else {
      // Yarn (Berry, the current major) with node_modules, as most Node services run it; on CI it
      // would refuse to write the new lockfile.
      writeFileSync(join(dir, '.yarnrc.yml'), ['nodeLinker: node-modules', 'enableTelemetry: false', 'enableImmutableInstalls: false', 'enableGlobalCache: true', 'npmRegistryServer: "https://registry.npmjs.org"', ''].join('\n'));
      await run(process.execPath, [yarnJs, 'install', '--mode=skip-build'], { cwd: dir, env: { ...userEnv, YARN_ENABLE_PROGRESS_BARS: 'false' } });
    }
  } catch (err) {
    throw new Error(`${manager} install failed in ${dir}:\n${output(err)}`);
  }
}

/**
 * Type-checks (and for node16 emits) the fixture's `entry` with one of its tsconfigs. `libCheck`
 * also checks every declaration file the app reaches (`skipLibCheck: false`), ours included; it costs
 * seconds per compile, and what it checks does not depend on the package manager, so one manager's
 * project does it.
 */
async function compile(dir: string, resolution: 'node16' | 'bundler', entry: string | readonly string[], libCheck = true): Promise<void> {
  const file = join(dir, `tsconfig.${resolution}.json`);
  const config = JSON.parse(readFileSync(file, 'utf8')) as { compilerOptions: Record<string, unknown> };
  const entries = typeof entry === 'string' ? [entry] : entry;
  writeFileSync(file, JSON.stringify({ ...config, compilerOptions: { ...config.compilerOptions, skipLibCheck: !libCheck }, include: entries.map((e) => `src/${e}`) }));
  try {
    await run(process.execPath, [tsc, '-p', `tsconfig.${resolution}.json`], { cwd: dir, env: userEnv });
  } catch (err) {
    throw new Error(`tsc (${resolution}) failed on ${entry}:\n${output(err)}`);
  }
}

/** Runs the compiled entry against the local services; returns its one JSON line. */
async function start(dir: string, entry: string): Promise<Record<string, unknown>> {
  const env = { ...userEnv, DATABASE_URL: testDatabaseUrl(), REDIS_URL: testRedisUrl(), SUFFIX: randomBytes(6).toString('hex') };
  try {
    const { stdout } = await run(process.execPath, [join('dist', entry.replace(/\.ts$/, '.js'))], { cwd: dir, env, timeout: 120_000 });
    return JSON.parse(stdout.trim().split('\n').at(-1)!) as Record<string, unknown>;
  } catch (err) {
    throw new Error(`${entry} failed:\n${output(err)}`);
  }
}

/** How the manager runs an installed bin (npx, pnpm exec, yarn run), against the local services. */
function fencedCommand(manager: Manager): { command: string; prefix: readonly string[]; env: NodeJS.ProcessEnv } {
  const env = { ...userEnv, DATABASE_URL: testDatabaseUrl(), REDIS_URL: testRedisUrl() };
  if (manager === 'npm') return { command: 'npx', prefix: ['--no-install', 'fenced'], env };
  if (manager === 'pnpm') return { command: 'pnpm', prefix: ['exec', 'fenced'], env };
  return { command: process.execPath, prefix: [yarnJs, 'fenced'], env };
}

/** `fenced …` through the manager's own way of running an installed bin; its JSON. `extraEnv` may unset a variable (undefined). */
async function fencedBin(manager: Manager, dir: string, args: readonly string[], extraEnv: Record<string, string | undefined> = {}): Promise<unknown> {
  const { command, prefix, env: base } = fencedCommand(manager);
  const env = { ...base, ...extraEnv };
  for (const [key, value] of Object.entries(extraEnv)) if (value === undefined) delete env[key];
  try {
    const { stdout } = await run(command, [...prefix, ...args], { cwd: dir, env, timeout: 60_000 });
    return JSON.parse(stdout) as unknown;
  } catch (err) {
    throw new Error(`${manager}: fenced ${args.join(' ')} failed:\n${output(err)}`);
  }
}

/** `fenced …` that must fail: its exit code and what it printed on stderr. */
async function fencedBinFailure(manager: Manager, dir: string, args: readonly string[]): Promise<{ code: number; stderr: string }> {
  const { command, prefix, env } = fencedCommand(manager);
  try {
    await run(command, [...prefix, ...args], { cwd: dir, env, timeout: 60_000 });
  } catch (err) {
    const e = err as { code?: unknown; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : -1, stderr: e.stderr ?? '' };
  }
  throw new Error(`${manager}: fenced ${args.join(' ')} succeeded, and should not have`);
}

function output(err: unknown): string {
  const e = err as { stdout?: string; stderr?: string; message?: string };
  return [e.message, e.stdout, e.stderr].filter(Boolean).join('\n').slice(-4000);
}

function setIoredis(dir: string, version: string): void {
  const file = join(dir, 'package.json');
  const manifest = JSON.parse(readFileSync(file, 'utf8')) as { dependencies: Record<string, string> };
  manifest.dependencies['ioredis'] = version;
  writeFileSync(file, JSON.stringify(manifest, null, 2));
}

// The projects are independent (their own folders, schemas and Redis keys) and much of an install is
// waiting on the disk and the package cache: they run side by side.
describe.concurrent('installed from the packed tarballs', () => {
  it.each<Manager>(['npm', 'pnpm', 'yarn'])(
    '%s: the app compiles strict (node16 and bundler; npm with every declaration file checked) and runs, on ioredis 6 and then 5',
    async (manager) => {
      const dir = newProject(fullApp());
      for (const ioredis of [versions.ioredis6, versions.ioredis5]) {
        setIoredis(dir, ioredis);
        await install(manager, dir);
        expect(installed('ioredis', dir)).toBe(ioredis);
        // Bundler resolution reads the same exports map whatever the ioredis major: checked once.
        const libCheck = manager === 'npm';
        if (ioredis === versions.ioredis6) await compile(dir, 'bundler', 'app.ts', libCheck);
        await compile(dir, 'node16', 'app.ts', libCheck);
        const result = await start(dir, 'app.ts');
        expect(result).toMatchObject({ ok: true, applied: 1 });
        expect(BigInt(result['refusedAt'] as string)).toBe(BigInt(result['token'] as string) + 1n);
        // The operators' command line, as the package manager runs an installed bin.
        if (ioredis === versions.ioredis6) expect(await fencedBin(manager, dir, ['status', '--json', '--prefix', `fenced-install-${manager}`])).toMatchObject({ leases: [], database: true });
      }
      // etcd3 is an optional peer this project did not install: asked for etcd, the command line says
      // what to install, exit 2 (bad usage), not "could not be reached" (a regression).
      if (manager === 'npm') {
        const refused = await fencedBinFailure(manager, dir, ['status', '--lease-store', 'etcd', '--etcd', 'http://127.0.0.1:9', '--json']);
        expect(refused).toMatchObject({ code: 2, stderr: expect.stringContaining('npm install etcd3') });
      }
    },
    INSTALL_TIMEOUT_MS,
  );

  it(
    'pnpm: a service on PostgreSQL alone needs neither ioredis nor kysely, to compile or to run',
    async () => {
      const dir = newProject({ ...sdk(['shared', 'consumer-guard']), pg: versions.pg, '@types/pg': versions.typesPg, '@types/node': versions.typesNode });
      await install('pnpm', dir);
      await compile(dir, 'node16', 'pg-only.ts');
      expect(await start(dir, 'pg-only.ts')).toEqual({ ok: true, inserted: 1, refused: true });
    },
    INSTALL_TIMEOUT_MS,
  );

  it(
    'pnpm: a scheduler on PostgreSQL alone (leases, guard, wrapped handler) needs no ioredis, compiles under exactOptionalPropertyTypes with every declaration checked, and delivers a fire whose first dispatch failed',
    async () => {
      const dir = newProject({ ...sdk(['shared', 'coordinator', 'consumer-guard', 'cli']), pg: versions.pg, '@types/pg': versions.typesPg, '@types/node': versions.typesNode });
      await install('pnpm', dir);
      // ioredis is an optional peer of every package, the command line's too: nothing pulled it in
      // (pnpm installs a required peer by itself, into its store).
      expect(existsSync(join(dir, 'node_modules', 'ioredis'))).toBe(false);
      expect(readdirSync(join(dir, 'node_modules', '.pnpm')).filter((entry) => entry.startsWith('ioredis@'))).toEqual([]);
      await compile(dir, 'node16', 'pg-leases.ts');
      expect(await start(dir, 'pg-leases.ts')).toMatchObject({ ok: true, failed: [1] });
      // The operators' command line runs there without it, on the PostgreSQL lease store.
      expect(await fencedBin('pnpm', dir, ['status', '--lease-store', 'postgres', '--json'], { REDIS_URL: undefined })).toMatchObject({ leaseStore: 'postgres' });
    },
    INSTALL_TIMEOUT_MS,
  );

  it(
    'pnpm: two replicas of an installed app, the leader frozen 20 s inside its transaction: the other leads within TTL + renew + 1 s, and the frozen write fails typed when it wakes',
    async () => {
      const FREEZE_MS = 20_000;
      const TAKEOVER_BOUND_MS = 3_000 + 1_000 + 1_000; // the app's TTL + renew interval + 1 s
      const dir = newProject({
        ...sdk(['shared', 'coordinator', 'consumer-guard']),
        ioredis: versions.ioredis6,
        pg: versions.pg,
        '@types/pg': versions.typesPg,
        '@types/node': versions.typesNode,
      });
      await install('pnpm', dir);
      await compile(dir, 'node16', 'frozen-replica.ts', false);
      const suffix = randomBytes(6).toString('hex');
      const schema = `install_frozen_${suffix}`;
      const keyPrefix = `install-frozen-${suffix}`;
      const admin = createPool({ max: 1 });
      const replicas: ChildHandle[] = [];
      const replica = (extra: Record<string, string> = {}) => {
        const child = spawnNode([join('dist', 'frozen-replica.js')], {
          cwd: dir,
          env: { ...userEnv, DATABASE_URL: testDatabaseUrl(), REDIS_URL: testRedisUrl(), SCHEMA: schema, KEY_PREFIX: keyPrefix, ...extra },
        });
        replicas.push(child);
        return child;
      };
      try {
        await admin.query(`CREATE SCHEMA ${schema}`);
        await admin.query(`CREATE TABLE ${schema}.ledger (id text PRIMARY KEY, token bigint NOT NULL)`);
        const deposed = replica({ FREEZE_AFTER_WRITES: '3' });
        const first = await deposed.waitForLine((l) => l['kind'] === 'elected', 30_000);
        const successor = replica();
        await successor.waitForLine((l) => l['kind'] === 'started', 30_000);
        const freezing = await deposed.waitForLine((l) => l['kind'] === 'freezing', 30_000);
        await waitFor(() => isStopped(deposed.process.pid!), 5000);
        const frozenAt = performance.now();

        const elected = await successor.waitForLine((l) => l['kind'] === 'elected', 30_000);
        const takeoverMs = performance.now() - frozenAt;
        expect(isStopped(deposed.process.pid!), 'the new term waited for the frozen leader').toBe(true);
        expect(BigInt(String(elected['token']))).toBeGreaterThan(BigInt(String(first['token'])));
        expect(takeoverMs, `next leader ${Math.round(takeoverMs)} ms after the freeze`).toBeLessThanOrEqual(TAKEOVER_BOUND_MS);
        await successor.waitForLine((l) => l['kind'] === 'write' && l['outcome'] === 'committed', 10_000);

        // The fault lasts 20 s, the new term writing all along; then the deposed leader wakes.
        await waitFor(() => performance.now() - frozenAt >= FREEZE_MS, FREEZE_MS + 10_000, 100);
        expect(isStopped(deposed.process.pid!)).toBe(true);
        const from = deposed.lines.length;
        deposed.process.kill('SIGCONT');
        const woke = await deposed.waitForLine((l) => l['kind'] === 'write', 15_000, from);
        expect(woke).toMatchObject({ id: freezing['id'], outcome: 'failed', code: 'GUARD_UNAVAILABLE' });
        await deposed.waitForLine((l) => l['kind'] === 'lost', 10_000, from);
        expect(deposed.process.exitCode, 'the woken replica died').toBeNull();
        const { rowCount } = await admin.query(`SELECT 1 FROM ${schema}.ledger WHERE id = $1`, [freezing['id']]);
        expect(rowCount).toBe(0);
        const { rows } = await admin.query<{ t: string | null }>(`SELECT max(token)::text AS t FROM ${schema}.ledger WHERE token < $1`, [String(elected['token'])]);
        expect(rows[0]!.t === null || BigInt(rows[0]!.t) <= BigInt(String(first['token']))).toBe(true);
      } finally {
        for (const child of replicas) {
          child.process.kill('SIGCONT');
          child.kill('SIGKILL');
        }
        await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => undefined);
        await admin.end();
        const redis = createRedis();
        await deleteKeys(redis, keyPrefix);
        redis.disconnect();
      }
    },
    INSTALL_TIMEOUT_MS,
  );

  it(
    'npm: every TypeScript block of the documents compiles in a strict app (exactOptionalPropertyTypes, every declaration file checked), each block importing what it takes from a library',
    async () => {
      // The libraries the blocks show fenced beside, at the versions this repository tests with.
      const tested = (name: string) => installed(name, join(repoRoot, 'test'));
      const dir = newProject({
        ...fullApp(),
        mysql2: tested('mysql2'),
        bullmq: tested('bullmq'),
        'graphile-worker': tested('graphile-worker'),
        'pg-boss': tested('pg-boss'),
        etcd3: tested('etcd3'),
        express: tested('express'),
        '@types/express': tested('@types/express'),
        fastify: tested('fastify'),
        pino: installed('pino'),
        // The SDK's own peer range stops below the API this repository pins (pnpm lets it pass; npm does not).
        '@opentelemetry/api': '~1.9.0',
        '@opentelemetry/exporter-prometheus': installed('@opentelemetry/exporter-prometheus'),
        '@opentelemetry/sdk-metrics': installed('@opentelemetry/sdk-metrics'),
      });
      // Each block a module of its own beside the reader's app objects (src/docs/context.ts).
      const blocks = typescriptBlocks(repoRoot);
      expect(blocks.length).toBeGreaterThan(15);
      const files = blocks.map((block) => {
        writeFileSync(join(dir, 'src', 'docs', `${block.name}.ts`), `// ${block.file}, the block at line ${block.line}\n${block.body}\nexport {};\n`);
        return { file: `docs/${block.name}.ts`, pgBoss: /\bboss\b|pg-boss/.test(block.body) };
      });
      await install('npm', dir);
      // pg-boss 12.38's own declaration files do not compile (manager.d.ts imports a type its types.d.ts
      // does not export: TS2724), whoever imports them: the blocks that use pg-boss are checked with
      // the libraries' declarations skipped, every other block with all of them checked.
      const checked = files.filter((f) => !f.pgBoss).map((f) => f.file);
      const beside = files.filter((f) => f.pgBoss).map((f) => f.file);
      expect(beside.length).toBeGreaterThan(0);
      await compile(dir, 'node16', ['docs/context.ts', ...checked]);
      await compile(dir, 'node16', ['docs/context.ts', 'docs/context-pg-boss.ts', ...beside], false);
    },
    INSTALL_TIMEOUT_MS,
  );

  it('every tarball is publishable as it is (npm publish --dry-run), with no workspace: range left', async () => {
    for (const pkg of PACKAGES) {
      const { stdout: manifest } = await run('tar', ['-xzOf', tarballs[pkg], 'package/package.json']);
      expect(manifest).not.toContain('workspace:');
      const { stdout: listing } = await run('tar', ['-tzf', tarballs[pkg]]);
      expect(listing, `${pkg} ships its tests`).not.toMatch(/\.test\.(ts|js)/);
      expect(listing).toContain('package/dist/index.d.ts');
      // Its README (its API) goes with it: a user on the registry sees it.
      expect(listing, `${pkg} ships no README`).toContain('package/README.md');
      await run('npm', ['publish', '--dry-run', '--access', 'public', tarballs[pkg]], { env: userEnv });
    }
    // Five npm processes one after another ran past the default 60 s in a CI beside four CPU hogs and
    // a mutation run (2026-12-04): the budget of the other install tests. Nothing here is a timing claim.
  }, INSTALL_TIMEOUT_MS);
});

describe('versioning with changesets', () => {
  it('`changeset version` bumps the five packages together and writes their changelogs', async () => {
    // A copy of the workspace's manifests and pending changesets; node_modules linked for the CLI.
    const dir = mkdtempSync(join(tmpdir(), 'fenced-changeset-'));
    projects.push(dir);
    for (const file of ['package.json', 'pnpm-workspace.yaml', '.changeset', 'test/package.json', ...PACKAGES.map((pkg) => `packages/${pkg}/package.json`)]) {
      cpSync(join(repoRoot, file), join(dir, file), { recursive: true });
    }
    symlinkSync(join(repoRoot, 'node_modules'), join(dir, 'node_modules'));
    writeFileSync(join(dir, '.changeset', 'install-check.md'), '---\n"@fenced/consumer-guard": patch\n---\n\nA change to the guard alone.\n');
    const before = manifestOf(dir, 'consumer-guard').version;
    await run(process.execPath, [join(repoRoot, 'node_modules', '@changesets', 'cli', 'bin.js'), 'version'], { cwd: dir, env: userEnv });

    const after = PACKAGES.map((pkg) => manifestOf(dir, pkg));
    expect(new Set(after.map((m) => m.version)).size).toBe(1);
    expect(after[0]!.version).not.toBe(before);
    for (const pkg of PACKAGES) expect(readFileSync(join(dir, 'packages', pkg, 'CHANGELOG.md'), 'utf8')).toContain(`## ${after[0]!.version}`);
    // The upgrade notes from 0.1.0 (once a README section) are changelog entries now.
    for (const pkg of PACKAGES) expect(readFileSync(join(dir, 'packages', pkg, 'CHANGELOG.md'), 'utf8')).toContain('What a 0.1.0 user changes when upgrading');
    // The guard's changelog carries the change; the peer on the wire contract stays a workspace range
    // (pnpm pack writes the released version into it).
    expect(readFileSync(join(dir, 'packages', 'consumer-guard', 'CHANGELOG.md'), 'utf8')).toContain('A change to the guard alone.');
    expect(manifestOf(dir, 'coordinator').peerDependencies?.['@fenced/shared']).toBe('workspace:^');
  });
});

function manifestOf(dir: string, pkg: PackageDir): { version: string; peerDependencies?: Record<string, string> } {
  return JSON.parse(readFileSync(join(dir, 'packages', pkg, 'package.json'), 'utf8')) as { version: string; peerDependencies?: Record<string, string> };
}
