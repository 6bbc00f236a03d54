/**
 * A simulation replica's script, bundled once per process into one JavaScript file that `node` starts
 * without tsx. The simulation starts dozens of replicas a run (three at the start, again after each
 * crash and restart), and each one under tsx spent about 1.3 s of CPU resolving and loading the SDK's
 * sources through the loader hooks, where the bundle takes about 0.6 s (measured alone, on this
 * two-core machine). Beside CPU hogs that time is what a replica loses before it can take part, and
 * it came out of every run's start.
 *
 * The bundle is the same source: the SDK packages are taken from their sources (the
 * `@fenced/source` condition, as tsx runs them), transformed by esbuild (as tsx transforms them),
 * and every npm dependency stays outside it, imported from its resolved path in node_modules, so a
 * replica runs the very modules the suite was installed with. Stack traces point at the sources
 * (source maps, `--enable-source-maps`).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { build, stop, type Plugin } from 'esbuild';

export interface BundledEntry {
  /** Builds the bundle (once; later calls wait for the first). */
  ready(): Promise<void>;
  /** The arguments that start it: node `args()`. Only after `ready()` resolved. */
  args(): string[];
}

/** Where this process's bundles go: one temporary folder, removed as the process exits. */
let folder: string | undefined;
function bundleFolder(): string {
  if (folder === undefined) {
    const made = mkdtempSync(join(tmpdir(), 'fenced-entry-'));
    folder = made;
    process.once('exit', () => rmSync(made, { recursive: true, force: true }));
  }
  return folder;
}

/**
 * Every bare import that is not an SDK package stays an import, of the file esbuild resolves it to
 * from the importing module (so a dependency of one package resolves as it does in that package,
 * pnpm's strict layout included).
 */
const dependenciesOutside: Plugin = {
  name: 'dependencies-outside',
  setup(b) {
    b.onResolve({ filter: /^[^./]/ }, async (args) => {
      if (args.path.startsWith('@fenced/') || args.path.startsWith('node:') || args.pluginData === dependenciesOutside) return undefined;
      const resolved = await b.resolve(args.path, { resolveDir: args.resolveDir, kind: args.kind, importer: args.importer, pluginData: dependenciesOutside });
      if (resolved.errors.length > 0) return { errors: resolved.errors };
      return { path: resolved.path, external: true };
    });
  },
};

let bundles = 0;
/** Builds under way: esbuild's service process is stopped when none is, not left beside the run. */
let building = 0;

/** The script at `script` (an absolute path), bundled on the first `ready()`. */
export function bundledEntry(script: string): BundledEntry {
  let built: Promise<string> | undefined;
  let outfile: string | undefined;
  return {
    ready() {
      built ??= (async () => {
        const target = join(bundleFolder(), `${++bundles}-${basename(script).replace(/\.ts$/, '')}.mjs`);
        building++;
        try {
          await build({
            entryPoints: [script],
            outfile: target,
            bundle: true,
            platform: 'node',
            format: 'esm',
            target: 'node20',
            conditions: ['@fenced/source'],
            sourcemap: true,
            logLevel: 'silent',
            plugins: [dependenciesOutside],
          });
        } finally {
          if (--building === 0) await stop();
        }
        outfile = target;
        return target;
      })();
      return built.then(() => undefined);
    },
    args() {
      if (outfile === undefined) throw new Error(`${basename(script)} is not bundled yet: await ready() first (the app's prepare does)`);
      return ['--enable-source-maps', outfile];
    },
  };
}
