/**
 * The five packages as a registry would get them: packed by pnpm (which runs each package's
 * `prepack` build and rewrites each `workspace:` range to the version it points at), into one folder
 * of tarballs.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { packArgs, PACKAGES, removeBuilds, tarballPath, type PackageDir } from '../../scripts/packages.mjs';

export { PACKAGES, type PackageDir };
export const repoRoot = fileURLToPath(new URL('../..', import.meta.url));

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
    removeBuilds(repoRoot);
    for (const pkg of PACKAGES) execFileSync('pnpm', packArgs(out), { cwd: join(repoRoot, 'packages', pkg), env, stdio: ['ignore', 'ignore', 'pipe'] });
  }
  const tarball = (pkg: PackageDir): string => {
    const path = tarballPath(repoRoot, out, pkg);
    if (!existsSync(path)) throw new Error(`${given === undefined ? 'pnpm pack wrote' : `FENCED_PACKED_DIR (${given}) holds`} no tarball for ${pkg} (found ${readdirSync(out).join(', ')})`);
    return path;
  };
  return Object.fromEntries(PACKAGES.map((pkg) => [pkg, tarball(pkg)])) as Record<PackageDir, string>;
}
