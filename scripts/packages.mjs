// The five packages and how they are packed as a fresh clone packs them: shared by `pnpm test`'s
// package checks (scripts/test.mjs) and the install tests (test/install/pack.ts), which install the
// tarballs the package checks packed.
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';

/** Folder names under packages/, in dependency order: a package's build reads the declarations of those before it. */
export const PACKAGES = ['shared', 'coordinator', 'consumer-guard', 'chaos', 'cli'];

/**
 * Removes every package's `dist`, so that each tarball holds only what its own `prepack` built (a
 * package without one would pack no code), as on a fresh clone.
 */
export function removeBuilds(root) {
  for (const pkg of PACKAGES) rmSync(join(root, 'packages', pkg, 'dist'), { recursive: true, force: true });
}

/** pnpm's arguments that pack the package in the working folder (its `prepack` builds it) into `folder`. */
export function packArgs(folder) {
  return ['pack', '--pack-destination', folder];
}

/** The tarball `pnpm pack` writes for a package into `folder`: `fenced-<folder name>-<version>.tgz`. */
export function tarballPath(root, folder, pkg) {
  const { version } = JSON.parse(readFileSync(join(root, 'packages', pkg, 'package.json'), 'utf8'));
  return join(folder, `fenced-${pkg}-${version}.tgz`);
}
