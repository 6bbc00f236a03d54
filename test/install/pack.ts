/**
 * The five packages as a registry would get them: built, then packed by pnpm (which rewrites each
 * `workspace:` range to the version it points at), into one folder of tarballs.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
export const PACKAGES = ['shared', 'coordinator', 'consumer-guard', 'chaos', 'cli'] as const;
export type PackageDir = (typeof PACKAGES)[number];

/** Builds every package and packs it; returns the tarball path of each, by folder name. */
export function packAll(env: NodeJS.ProcessEnv): Record<PackageDir, string> {
  execFileSync('pnpm', ['--reporter', 'silent', 'build'], { cwd: repoRoot, env, stdio: ['ignore', 'ignore', 'pipe'] });
  const out = mkdtempSync(join(tmpdir(), 'fenced-packs-'));
  for (const pkg of PACKAGES) {
    execFileSync('pnpm', ['pack', '--pack-destination', out], { cwd: join(repoRoot, 'packages', pkg), env, stdio: ['ignore', 'ignore', 'pipe'] });
  }
  const files = readdirSync(out);
  const tarball = (pkg: PackageDir): string => {
    const name = files.find((f) => f === `fenced-${pkg}-${readVersion(pkg)}.tgz`);
    if (name === undefined) throw new Error(`pnpm pack wrote no tarball for ${pkg} (found ${files.join(', ')})`);
    return join(out, name);
  };
  return Object.fromEntries(PACKAGES.map((pkg) => [pkg, tarball(pkg)])) as Record<PackageDir, string>;
}

function readVersion(pkg: PackageDir): string {
  return (JSON.parse(readFileSync(join(repoRoot, 'packages', pkg, 'package.json'), 'utf8')) as { version: string }).version;
}
