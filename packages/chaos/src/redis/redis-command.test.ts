import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redisCommand, redisCommands } from './redis-command.js';
import { startRedisServer, type RedisServerProcess } from './redis-server.js';

let server: RedisServerProcess;
beforeAll(async () => {
  server = await startRedisServer();
});
afterAll(async () => {
  await server?.stop();
});

describe('the toolkit’s Redis admin channel', () => {
  it('answers commands sent on one connection in order, each reply whole, however it arrives', async () => {
    // A bulk string of 1 MiB arrives in many chunks; a nil, an integer and a simple string around it.
    const big = 'x'.repeat(1 << 20);
    const replies = await redisCommands(server.port, [['SET', 'big', big], ['GET', 'big'], ['GET', 'absent'], ['INCR', 'n'], ['CLIENT', 'ID']]);
    expect(replies.slice(0, 4)).toEqual(['OK', big, null, 1]);
    expect(typeof replies[4]).toBe('number');
    // One connection: CLIENT ID is the same for commands sent together, another for the next call.
    const [first, second] = await redisCommands(server.port, [['CLIENT', 'ID'], ['CLIENT', 'ID']]);
    expect(first).toBe(second);
    expect(await redisCommand(server.port, ['CLIENT', 'ID'])).not.toBe(first);
  });

  it('rejects with the first error reply, saying what the server said', async () => {
    await expect(redisCommands(server.port, [['SET', 'k', 'v'], ['INCR', 'k'], ['GET', 'k']])).rejects.toThrow(/^redis: ERR value is not an integer/);
    await expect(redisCommand(server.port, ['NO-SUCH-COMMAND'])).rejects.toThrow(/^redis: ERR unknown command/);
  });
});
