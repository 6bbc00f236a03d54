import { describe, expect, it } from 'vitest';
import { NotOnPrimaryError } from './redis-lease-store.js';

// What an operator reads when a grant or renew is refused for its server. The server is read off the
// reply's connection in the same turn as the reply, so a connection closed in between is not
// something a deployment can be made to show; the message for it is stated here.
describe('NotOnPrimaryError', () => {
  it('names the server the reply came from, or a closed connection when there was none', () => {
    expect(new NotOnPrimaryError('10.0.0.7:6380')).toMatchObject({
      name: 'NotOnPrimaryError',
      server: '10.0.0.7:6380',
      message: 'the reply came from 10.0.0.7:6380, not the primary every sentinel names (a failover in progress)',
    });
    const closed = new NotOnPrimaryError(undefined);
    expect(closed.server).toBeUndefined();
    expect(closed.message).toBe('the reply came from a closed connection, not the primary every sentinel names (a failover in progress)');
  });
});
