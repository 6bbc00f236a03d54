/**
 * `pnpm model`: checks model/fencing.pml with SPIN, exhaustively within its bounds.
 *
 * 1. The protocol, in both configurations (fences advanced at election, with a lossy failover of the
 *    lease store; and no fences given to the coordinator), for the safety properties (every
 *    assertion, every state) and for liveness (every fire takes effect once the faults are over,
 *    under weak fairness): no error may be found.
 * 2. Each classic bug, a variant of the model: SPIN must reject it, by the property it breaks, with a
 *    counterexample (a trail, replayed with `spin -t`).
 *
 * Ends with one line, `model: <states> states, <errors> errors, bounds <nodes> nodes / <resources>
 * resources / <terms> terms`, and exits 1 when the protocol has an error or a variant was not
 * rejected (2 when spin or a C compiler is missing). A failure's trail and its replay are kept in a
 * folder whose path is printed. `--terms N --faults N` check deeper (FAULTS 2 needs TERMS 7: about
 * 46 million states, a minute and 3 GB for safety alone on two cores).
 */
import { execFile, spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import pLimit from 'p-limit';

const root = fileURLToPath(new URL('../..', import.meta.url));
const MODEL = join(root, 'model/fencing.pml');

const { values: args } = parseArgs({
  options: {
    terms: { type: 'string', default: '5' },
    faults: { type: 'string', default: '1' },
    /** pan's memory limit, MB: a bound that cannot be met fails instead of swapping the machine. */
    'memory-mb': { type: 'string', default: '4096' },
    /**
     * Each state stored compressed (pan's COLLAPSE, lossless: the search stays exhaustive): about 40 %
     * less memory, a third more time. The default bounds fit uncompressed (under 400 MB a check);
     * deeper ones (`--terms 7 --faults 2`, some 46 million states) need it.
     */
    compress: { type: 'boolean', default: false },
  },
});
const BOUNDS = { nodes: 3, resources: 2, terms: Number(args.terms), faults: Number(args.faults), fires: 2 };
const MEMORY_MB = Number(args['memory-mb']);

type Property = 'P1' | 'P2' | 'P3' | 'P4' | 'P5' | 'P6' | 'P7' | 'bound';

/** How SPIN names each property when it fails: the assertion's text, or an acceptance cycle (P7). */
const PROPERTY_OF: ReadonlyArray<readonly [Property, RegExp]> = [
  ['P2', /assertion violated \(lossy\|\|/],
  ['P3', /assertion violated \(\(tokenTerm/],
  ['P4', /assertion violated {2}!\(applied\[f\]\)/],
  ['P5', /assertion violated \(t<fence/],
  ['P6', /assertion violated \(\(counter\+1\)>repaired\)/],
  ['P1', /assertion violated \(t>=fence/],
  ['bound', /assertion violated 0/],
  ['P7', /acceptance cycle/],
];

const PROPERTIES: Record<Property, string> = {
  P1: 'no write commits with a token below its fence',
  P2: 'no write of a term commits after a later term raised the fence',
  P3: 'a token commits writes for one term only',
  P4: 'each fire takes effect at most once',
  P5: 'the fast path refuses only what the fence refuses',
  P6: 'after a refusal by a fence, every later grant mints above it',
  P7: 'every fire takes effect once the faults are over',
  bound: 'the protocol never needs more grants than the bound',
};

interface Variant {
  readonly define: string;
  readonly bug: string;
  readonly breaks: Property;
  /** Extra defines: the configuration where the bug does harm. */
  readonly with?: readonly string[];
}

/** The classic bugs, each a -D variant of the model, and the property SPIN must find broken. */
const VARIANTS: readonly Variant[] = [
  { define: 'BUG_MINT_AFTER_GRANT', bug: 'the token minted by a second call after the grant (SET NX, then INCR)', breaks: 'P2' },
  { define: 'BUG_CHECK_OUTSIDE_TX', bug: "the fence checked before the write's transaction, not inside it", breaks: 'P1' },
  { define: 'BUG_ADVANCE_NOT_STRICT', bug: "the election's advance accepts a fence that already holds its token", breaks: 'P3' },
  {
    define: 'BUG_MARK_BEFORE_COMMIT',
    bug: 'the fast-path mark raised before the write commits',
    breaks: 'P5',
    // With fences advanced at election every write's token is already the fence's: the early mark
    // can only run ahead where writes alone raise the fences.
    with: ['ADVANCE=0'],
  },
  { define: 'BUG_NO_CLAIM', bug: "no fire claim in the write's transaction", breaks: 'P4' },
  { define: 'BUG_NO_REPAIR', bug: 'a refused advance leaves the counter below the fence', breaks: 'P6' },
  { define: 'BUG_STALE_KEEPS_TERM', bug: 'a stale refusal stops the job but keeps the term (after a lossy failover no fire takes effect again)', breaks: 'P7' },
];

interface Check {
  readonly errors: number;
  readonly states: number;
  readonly property: Property | null;
  readonly seconds: number;
  readonly output: string;
  readonly dir: string;
}

function run(command: string, argv: readonly string[], cwd: string): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(command, argv, { cwd, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) => {
      const output = `${stdout}${stderr}`;
      // pan exits non-zero when it finds an error: its output says which, and is what is judged.
      if (error !== null && (command !== './pan' || typeof error.code !== 'number')) reject(new Error(`${command} ${argv.join(' ')} failed (${error.message}):\n${output}`));
      else resolve(output);
    });
  });
}

/** One exhaustive check: safety (every assertion) or liveness (the LTL claim, weak fairness). */
async function check(kind: 'safety' | 'liveness', defines: readonly string[]): Promise<Check> {
  const dir = mkdtempSync(join(tmpdir(), 'fenced-model-'));
  cpSync(MODEL, join(dir, 'fencing.pml'));
  const started = performance.now();
  const flags = [`-DNODES=${BOUNDS.nodes}`, `-DRESOURCES=${BOUNDS.resources}`, `-DTERMS=${BOUNDS.terms}`, `-DFAULTS=${BOUNDS.faults}`, ...defines.map((d) => `-D${d}`)];
  await run('spin', [...flags, '-a', 'fencing.pml'], dir);
  // MEMLIM makes pan stop with an error rather than take the machine. -O1, not -O2: measured on the
  // default bounds (2026-12-06), the verifier compiles in 1.6 s, not 3.9 s, and searches as fast (the
  // liveness check 10.8 s against 9.9 s), and eleven checks compile each its own. SAFETY leaves out
  // the cycle search a safety check never runs.
  const cc = ['-O1', '-w', ...(args.compress ? ['-DCOLLAPSE'] : []), `-DMEMLIM=${MEMORY_MB}`, ...(kind === 'safety' ? ['-DNOCLAIM', '-DSAFETY'] : ['-DNFAIR=5']), '-o', 'pan', 'pan.c'];
  await run('cc', cc, dir);
  const output = await run('./pan', kind === 'safety' ? ['-m1000000'] : ['-a', '-f', '-m1000000'], dir);
  const seconds = (performance.now() - started) / 1000;
  if (/pan: out of memory|error: max search depth too small|pan: reached -DMEMLIM bound/.test(output)) {
    throw new Error(`pan could not finish the ${kind} check (${defines.join(' ') || 'the protocol'}): it needs more memory or depth than allowed${args.compress ? '' : ' (--compress stores each state in less memory)'}\n${output}`);
  }
  const errors = Number(/errors: (\d+)/.exec(output)?.[1] ?? NaN);
  const states = Number(/([\d.e+]+) states, stored/.exec(output)?.[1] ?? NaN);
  if (!Number.isFinite(errors) || !Number.isFinite(states)) throw new Error(`pan's output was not understood:\n${output}`);
  const property = errors === 0 ? null : (PROPERTY_OF.find(([, pattern]) => pattern.test(output))?.[0] ?? null);
  return { errors, states, property, seconds, output, dir };
}

/** Keeps a failing check's trail and its replay where they can be read, and says where. */
function keep(name: string, result: Check): string {
  const kept = join(root, '.model-failures', `${new Date().toISOString().replace(/[:.]/g, '-')}-${name}`);
  mkdirSync(kept, { recursive: true });
  cpSync(result.dir, kept, { recursive: true, filter: (src) => !src.endsWith('/pan') && !/pan\.[bchmpt]$/.test(src) });
  writeFileSync(join(kept, 'pan-output.txt'), result.output);
  const replay = spawnSync('spin', ['-t', '-p', '-g', '-l', 'fencing.pml'], { cwd: result.dir, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  writeFileSync(join(kept, 'counterexample.txt'), `${replay.stdout ?? ''}${replay.stderr ?? ''}`);
  return kept;
}

async function main(): Promise<number> {
  for (const [tool, argv] of [['spin', ['-V']], ['cc', ['--version']]] as const) {
    const probe = spawnSync(tool, argv, { encoding: 'utf8' });
    if (probe.error !== undefined || probe.status !== 0) {
      console.error(`pnpm model needs ${tool} on the PATH (on Debian: apt-get install ${tool === 'spin' ? 'spin' : 'gcc'}; .ci/run installs it)`);
      return 2;
    }
  }
  let states = 0;
  let errors = 0;
  let unrejected = 0;
  const started = performance.now();
  const configurations = [
    { name: 'fences advanced at election, a lossy failover', defines: [] as string[] },
    { name: 'no fences given to the coordinator', defines: ['ADVANCE=0'] },
  ];
  const protocolChecks = configurations.flatMap((configuration) => (['safety', 'liveness'] as const).map((kind) => ({ configuration, kind })));
  // As many at once as there are cores, and no more than half the memory allows at pan's limit each.
  const width = Math.max(1, Math.min(availableParallelism(), Math.floor(totalmem() / 2 / (MEMORY_MB * 1024 * 1024))));
  // The checks are independent processes: the cores share them (and beside other load the scheduler
  // gives several processes more of the machine than one).
  const limit = pLimit(width);
  const results = [
    ...protocolChecks.map(({ configuration, kind }) => limit(() => check(kind, configuration.defines))),
    ...VARIANTS.map((variant) => limit(() => check(variant.breaks === 'P7' ? 'liveness' : 'safety', ['VARIANT', variant.define, ...(variant.with ?? [])]))),
  ];
  // Printed in a fixed order, each as soon as it and those before it are done.
  for (const [i, { configuration, kind }] of protocolChecks.entries()) {
    const result = await results[i]!;
    states += result.states;
    errors += result.errors;
    const where = result.errors === 0 ? '' : `: ${result.property ?? 'an error'} (${result.property === null ? 'see the output' : PROPERTIES[result.property]}); kept in ${keep(`protocol-${kind}`, result)}`;
    console.log(`protocol, ${configuration.name}, ${kind}: ${result.states} states, ${result.errors} errors, ${result.seconds.toFixed(1)} s${where}`);
    rmSync(result.dir, { recursive: true, force: true });
  }
  for (const [i, variant] of VARIANTS.entries()) {
    const result = await results[protocolChecks.length + i]!;
    const rejected = result.errors > 0 && result.property === variant.breaks;
    if (!rejected) unrejected++;
    const verdict = rejected
      ? `rejected: ${variant.breaks} (${PROPERTIES[variant.breaks]}), a counterexample ${/at depth (\d+)/.exec(result.output)?.[1] ?? '?'} steps deep`
      : `NOT REJECTED as expected (${variant.breaks}): ${result.errors === 0 ? 'no error found' : `found ${result.property ?? 'another error'}`}; kept in ${keep(variant.define, result)}`;
    console.log(`variant ${variant.define} (${variant.bug}): ${verdict}, ${result.seconds.toFixed(1)} s`);
    rmSync(result.dir, { recursive: true, force: true });
  }
  console.log(`checked in ${((performance.now() - started) / 1000).toFixed(1)} s, ${width} checks at a time (${BOUNDS.fires} fires, ${BOUNDS.faults} fault(s) beside the lossy failover)`);
  console.log(`model: ${states} states, ${errors} errors, bounds ${BOUNDS.nodes} nodes / ${BOUNDS.resources} resources / ${BOUNDS.terms} terms`);
  return errors > 0 || unrejected > 0 ? 1 : 0;
}

process.exitCode = await main();
