/**
 * The five packages as a registry would get them: packed by pnpm (which runs each package's
 * `prepack` build and rewrites each `workspace:` range to the version it points at), into one folder
 * of tarballs.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
export const PACKAGES = ['shared', 'coordinator', 'consumer-guard', 'chaos', 'cli'] as const;
export type PackageDir = (typeof PACKAGES)[number];

/**
 * Packs every package as a fresh clone would: with no `dist` at all, so that each tarball holds only
 * what its own `prepack` built (a package without one packs no code); returns the tarball path of
 * each, by folder name. In dependency order: a package's build reads the declarations of those it
 * depends on. `pnpm test` packs them so once, for its package checks, and names the folder in
 * FENCED_PACKED_DIR: those tarballs are taken as they are (packing again would build the same code).
 */
export function packAll(env: NodeJS.ProcessEnv): Record<PackageDir, string> {
  const given = process.env['FENCED_PACKED_DIR'];
  const out = given ?? mkdtempSync(join(tmpdir(), 'fenced-packs-'));
  if (given === undefined) {
    for (const pkg of PACKAGES) rmSync(join(repoRoot, 'packages', pkg, 'dist'), { recursive: true, force: true });
    for (const pkg of PACKAGES) {
      execFileSync('pnpm', ['pack', '--pack-destination', out], { cwd: join(repoRoot, 'packages', pkg), env, stdio: ['ignore', 'ignore', 'pipe'] });
    }
  }
  const files = readdirSync(out);
  const tarball = (pkg: PackageDir): string => {
    const name = files.find((f) => f === `fenced-${pkg}-${readVersion(pkg)}.tgz`);
    if (name === undefined) throw new Error(`${given === undefined ? 'pnpm pack wrote' : `FENCED_PACKED_DIR (${given}) holds`} no tarball for ${pkg} (found ${files.join(', ')})`);
    return join(out, name);
  };
  return Object.fromEntries(PACKAGES.map((pkg) => [pkg, tarball(pkg)])) as Record<PackageDir, string>;
}

function readVersion(pkg: PackageDir): string {
  return (JSON.parse(readFileSync(join(repoRoot, 'packages', pkg, 'package.json'), 'utf8')) as { version: string }).version;
}
