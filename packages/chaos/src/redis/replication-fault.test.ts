import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redisCommand, redisCommands } from './redis-command.js';
import { startRedisSentinel, type RedisSentinel } from './redis-sentinel.js';
import { waitForReplicaSync } from './replica-sync.js';

// A real Sentinel deployment (a primary, two replicas, three sentinels) whose replication the
// simulation's lossy failovers hold back. The hold must hold every time, including when a replica is
// reconnecting as it is taken (Redis reconnects at once after a lost link), and its heal must let
// every replica sync again at once, not after `repl-timeout` (60 s), and by PSYNC: one let through by
// the old SYNC never acknowledges what it applied.
let sentinel: RedisSentinel;

beforeAll(async () => {
  // A long down-after: the sentinels must not fail over under this test's feet on a busy machine.
  sentinel = await startRedisSentinel({ downAfterMs: 30_000 });
  // A full sync starts at once instead of after 5 s: a replica that gets one past the hold (by the
  // old SYNC, say) then shows within the test's wait below.
  for (const server of sentinel.servers) await redisCommand(server.port, ['CONFIG', 'SET', 'repl-diskless-sync-delay', '0']);
}, 120_000);
afterAll(async () => {
  await sentinel?.stop();
});

const ROUNDS = 12;

describe('holding a Sentinel primary’s replication', () => {
  it(`keeps every write from both replicas, also when they are reconnecting as it is taken, and lets them sync again at once (${ROUNDS} rounds)`, async () => {
    const primary = await sentinel.primary();
    const replicas = sentinel.servers.filter((s) => s !== primary);
    for (let round = 0; round < ROUNDS; round++) {
      // Both replicas mid-handshake (or about to be) while the hold is taken.
      const dropped = redisCommand(primary.port, ['CLIENT', 'KILL', 'TYPE', 'replica']);
      await sentinel.holdReplication();
      await dropped;
      // WAIT answers for the writes of its own connection: as soon as that many replicas acknowledged
      // the write, so one that slipped through the hold answers at once; a held one never does, so
      // WAIT runs out its time.
      const [, acknowledged] = await redisCommands(primary.port, [['INCR', 'held-write'], ['WAIT', '1', '1000']], 5000);
      expect(acknowledged, `round ${round}: replicas that received a write made while replication was held`).toBe(0);
      // A replica synced by the old SYNC never acknowledges: what each holds says it plainly.
      for (const replica of replicas) {
        expect(await redisCommand(replica.port, ['GET', 'held-write']), `round ${round}: the replica on ${replica.port} while held`).toBe(round === 0 ? null : String(round));
      }
      // Nor is any replica on its way to one (a full sync it was granted, still being sent).
      expect(String(await redisCommand(primary.port, ['INFO', 'replication'])), `round ${round}: replicas the held primary serves`).toMatch(/^connected_slaves:0\r?$/m);

      await sentinel.healReplication();
      for (const replica of replicas) await waitForReplicaSync(replica.port, 15_000);
      // A write after the held one, acknowledged by both replicas: each has applied the stream up to
      // it, the held write with it (a replica's link being up says only that the stream flows).
      const [written, , inSync] = await redisCommands(primary.port, [['GET', 'held-write'], ['SET', 'healed', String(round)], ['WAIT', '2', '15000']], 20_000);
      // What each server says of its role and offsets, read at once, is what a failure needs.
      const states = async () => (await Promise.all([primary, ...replicas].map(async (s) => `${s.port}: ${String(await redisCommand(s.port, ['INFO', 'replication']).catch((err: Error) => err.message)).replace(/\r?\n/g, ' ')}`))).join(' | ');
      expect(inSync, `round ${round}: replicas in sync after the heal${inSync === 2 ? '' : `; ${await states()}`}`).toBe(2);
      for (const replica of replicas) {
        const value = await redisCommand(replica.port, ['GET', 'held-write']);
        expect(value, `round ${round}: the replica on ${replica.port} after the heal${value === written ? '' : `; ${await states()}`}`).toBe(written);
      }
    }
  }, 240_000);
});
