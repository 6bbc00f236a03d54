/**
 * One replica of the scheduler whose job calls the ledger service (service.ts), as its own OS
 * process: every replica runs a scheduler (only the leader dispatches) that fires `post-entry` every
 * EVERY_MS, and each fire is one HTTP call to the service.
 *
 * MODE=guarded: the coordinator's lease and tokens, the scheduler with a handler that sends the
 * signed fire in its `Fenced-Fire` header (`sendFire`) and returns the answer; the scheduler sends
 * a fire the service answered 503, or that got no answer, again while the term lasts. MODE=control: the same calls on the lease alone, the
 * token in the body, as the team ran it before.
 *
 * The moment the simulation aims mid-write faults at (`handler.prechecked-before-write`) is, here,
 * between the request's headers and its body (`http.headers-sent-before-body`): the service has the
 * fire and its token, and waits for the body. Lines as the simulation expects: belief, dispatch,
 * write (begin, committed, duplicate, stale, failed), failpoint.
 *
 * Env: NODE_NAME, MODE, REDIS_URL, KEY_PREFIX, TTL_MS, RENEW_MS, EVERY_MS, SERVICE_URL, SIGNING_KEY.
 */
import { Redis } from 'ioredis';
import { createCoordinator, createScheduler } from '@fenced/coordinator';
import { sendFire, type FireResponse } from '@fenced/consumer-guard/http';
import { createEnvelope, parseToken, signEnvelope, type Envelope } from '@fenced/shared';
import { listenForFailpointCommands } from '../ledger-sim/failpoint-commands.js';
import { env, line, reportLeadership, startControlScheduler } from '../sim-support.js';
import { JOB, KEY_ID, LEASE } from './names.js';
import { startStarvationProbe } from '@fenced/chaos/replica';

const node = env('NODE_NAME');
const mode = env('MODE');
const everyMs = Number(env('EVERY_MS'));
const keyPrefix = env('KEY_PREFIX');
const serviceUrl = env('SERVICE_URL');
listenForFailpointCommands(line, { 'handler.prechecked-before-write': 'http.headers-sent-before-body' });
// How long this machine keeps the replica off the CPU: the simulation credits it to lateness.
startStarvationProbe(line);

const redis = new Redis(env('REDIS_URL'), { maxRetriesPerRequest: 1, connectTimeout: 500, commandTimeout: 1000, retryStrategy: () => 100 });
redis.on('error', () => {});
const coordinatorOptions = { redis, lease: LEASE, keyPrefix, ttlMs: Number(env('TTL_MS')), renewIntervalMs: Number(env('RENEW_MS')), acquireRetryMs: 100, nodeId: node };

/** The write line the service's answer stands for. */
function outcomeOf(response: FireResponse): string {
  if (response.outcome === 'applied' || (mode === 'control' && response.status === 201)) return 'committed';
  if (response.outcome === 'replayed') return 'duplicate';
  if (response.outcome === 'stale' || response.outcome === 'duplicate') return response.outcome;
  return 'failed';
}

/**
 * The control's call: the service for one fire, again until it answers (the team's own loop before
 * fenced; the control's scheduler records a fire as dispatched either way).
 */
async function callUntilAnswered(envelope: Envelope, body: unknown): Promise<void> {
  const fire = { fireId: envelope.fireId, token: envelope.token };
  line({ kind: 'write', outcome: 'begin', ...fire });
  for (;;) {
    let outcome: string;
    let reason: string | undefined;
    try {
      const response = await sendFire(serviceUrl, { envelope, body });
      outcome = outcomeOf(response);
      if (outcome === 'failed') reason = `HTTP ${response.status}`;
    } catch (err) {
      outcome = 'failed';
      reason = (err as Error).message;
    }
    line({ kind: 'write', outcome, ...fire, ...(reason === undefined ? {} : { reason }) });
    if (outcome !== 'failed') return;
    await new Promise((r) => setTimeout(r, 100));
  }
}

if (mode === 'guarded') {
  const key = { kid: KEY_ID, secret: env('SIGNING_KEY') };
  const coordinator = createCoordinator(coordinatorOptions);
  reportLeadership(coordinator, line);
  const scheduler = createScheduler({
    coordinator,
    jobs: {
      [JOB]: {
        everyMs,
        // The handler as the READMEs show it, one sendFire, its answer returned: the scheduler reads
        // the answer's Fenced-Outcome and dispatches the fire again when the service answered 503 or
        // not at all. Without the fire's context (`...context`, which the README's handler spreads
        // in): its signal, and its timeout of one lease TTL, abort a caller woken from a pause before
        // its request's body goes (seed 7: pause and stall toothless, no late request reached the
        // service). The simulation runs the case they cannot stop, a request whose bytes left before
        // the term ended, which the service must refuse. The lines around it are instrumentation.
        handler: async (envelope: Envelope) => {
          const leading = coordinator.currentTerm()?.token === BigInt(envelope.token);
          const fire = { fireId: envelope.fireId, token: envelope.token };
          line({ kind: 'dispatch', ...fire, scheduledAt: Date.parse(envelope.scheduledAt), leading });
          line({ kind: 'write', outcome: 'begin', ...fire });
          try {
            const response = await sendFire(serviceUrl, { envelope, body: { caller: node } });
            const outcome = outcomeOf(response);
            line({ kind: 'write', outcome, ...fire, ...(outcome === 'failed' ? { reason: `HTTP ${response.status}` } : {}) });
            return response;
          } catch (err) {
            line({ kind: 'write', outcome: 'failed', ...fire, reason: (err as Error).message });
            throw err;
          }
        },
      },
    },
    seal: (envelope: Envelope) => signEnvelope(envelope, key),
    misfire: 'all',
    catchUpWindowMs: 60_000,
    maxCatchUpFires: 1000,
    tickMs: 10,
  });
  scheduler.start();
  await coordinator.start();
  process.on('SIGTERM', () => void Promise.allSettled([scheduler.stop(), coordinator.stop()]).finally(() => process.exit(0)));
} else if (mode === 'control') {
  const coordinator = createCoordinator(coordinatorOptions);
  reportLeadership(coordinator, line);
  const stop = startControlScheduler({
    store: { redis },
    keyPrefix,
    lease: LEASE,
    job: JOB,
    everyMs,
    coordinator,
    report: line,
    deliver: async ({ fireId, scheduledAt, token }) => {
      // The same client as the guarded run (so the same moment can be stopped), the fire in the body.
      const envelope = createEnvelope({ job: JOB, scheduledAt, token: parseToken(token), issuer: node, payload: null });
      await callUntilAnswered(envelope, { fireId, token: token.toString(), caller: node, scheduledAt });
    },
  });
  await coordinator.start();
  process.on('SIGTERM', () => {
    stop();
    void coordinator.stop().finally(() => process.exit(0));
  });
} else {
  throw new Error(`MODE must be guarded or control, not ${mode}`);
}
line({ kind: 'ready', mode });
