import type { Redis } from 'ioredis';
import { withTimeout } from '@fenced/shared/internal';
import type { IoRedisClient } from './ioredis-client.js';

/**
 * For a Sentinel client: was a reply from the primary that the sentinels name?
 *
 * `failoverDetector` moves a client off a deposed primary when a sentinel announces the switch, but
 * sentinels learn of a failover one after another, a client can hear the announcement late, and a
 * command sent to a frozen primary just before the failover is executed when it resumes. A resumed
 * primary still believes it is the primary until the sentinels reconfigure it (about 10 s measured
 * here), and an election there mints a token the real primary never saw. So after every acquire and
 * renew reply, the coordinator asks every sentinel who the primary is (a fresh answer, asked after
 * the reply arrived): the reply counts only when a majority of sentinels answer and every answer
 * names the server the reply came from. During a failover's propagation that is no, and the node
 * stays (or steps down to) standby: fail closed.
 *
 * One confirmer per client (every coordinator of a lease group shares it), and concurrent callers
 * share one round of questions.
 */
export interface PrimaryConfirmer {
  /** The address (`host:port`) the client's connection is on now; undefined when not connected. */
  connected(): string | undefined;
  /** Whether every sentinel that answers, and a majority answer, names `address`; asked after `since` (`performance.now()`). */
  names(address: string | undefined, since: number): Promise<boolean>;
}

const confirmers = new WeakMap<object, PrimaryConfirmer>();

/** The confirmer of `redis`, or undefined when it is not a Sentinel client. */
export function primaryConfirmer(redis: IoRedisClient, timeoutMs: number): PrimaryConfirmer | undefined {
  if (redis.isCluster) return undefined;
  const client = redis as Redis;
  const options = client.options;
  const sentinels = options.sentinels;
  if (!Array.isArray(sentinels) || sentinels.length === 0 || options.name === undefined) return undefined;
  const existing = confirmers.get(client);
  if (existing !== undefined) return existing;

  // Plain connections to the sentinels, with the client's sentinel credentials.
  const askers = sentinels.map((s) =>
    client.duplicate({
      sentinels: undefined,
      host: s.host ?? '127.0.0.1',
      port: s.port ?? 26379,
      username: options.sentinelUsername,
      password: options.sentinelPassword,
      db: 0,
      lazyConnect: true,
      maxRetriesPerRequest: 1,
      connectionName: undefined,
    }),
  );
  for (const asker of askers) asker.on('error', () => {});
  client.once('end', () => askers.forEach((a) => a.disconnect()));

  /** What every sentinel answers now (undefined: no answer in time). */
  const ask = () =>
    Promise.all(
      askers.map((asker) =>
        withTimeout(asker.call('SENTINEL', 'get-master-addr-by-name', options.name!) as Promise<[string, string] | null>, timeoutMs, 'sentinel').then(
          (reply) => (reply === null ? null : `${normalize(reply[0])}:${reply[1]}`),
          () => undefined,
        ),
      ),
    );

  let round: { startedAt: number; answers: ReturnType<typeof ask> } | undefined;
  const confirmer: PrimaryConfirmer = {
    connected() {
      const stream = client.stream;
      if (client.status !== 'ready' || stream === undefined || stream.remoteAddress === undefined) return undefined;
      return `${normalize(stream.remoteAddress)}:${stream.remotePort}`;
    },
    async names(address, since) {
      if (address === undefined) return false;
      if (round === undefined || round.startedAt < since) round = { startedAt: performance.now(), answers: ask() };
      const answered = (await round.answers).filter((a) => a !== undefined);
      return answered.length > askers.length / 2 && answered.every((a) => a === address);
    },
  };
  confirmers.set(client, confirmer);
  return confirmer;
}

/** `::ffff:127.0.0.1` (an IPv4 address on an IPv6 socket) is `127.0.0.1`. */
function normalize(address: string): string {
  return address.startsWith('::ffff:') ? address.slice('::ffff:'.length) : address;
}
