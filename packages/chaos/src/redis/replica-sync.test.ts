import { describe, expect, it } from 'vitest';
import { freePort } from '../ports.js';
import { waitForReplicaSync } from './replica-sync.js';

// The shared Redis of the test machine is a primary: never in sync as a replica.
const REDIS_PORT = Number(new URL(process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379').port || 6379);

describe('waitForReplicaSync', () => {
  it('says, when it gives up, what the server said of its replication: a primary is not a replica in sync', async () => {
    await expect(waitForReplicaSync(REDIS_PORT, 100)).rejects.toThrow(new RegExp(`^the Redis server on ${REDIS_PORT} did not sync with its primary within 100 ms \\(role:master connected_slaves:\\d+\\)$`));
  });

  it('says when the server did not answer at all', async () => {
    const closed = await freePort();
    await expect(waitForReplicaSync(closed, 100)).rejects.toThrow(`the Redis server on ${closed} did not sync with its primary within 100 ms (it did not answer INFO replication)`);
  });
});
