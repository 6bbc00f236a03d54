import net from 'node:net';

/** One RESP reply: simple string, integer, bulk string (null when nil), or the error a `-` reply says. */
type Reply = string | number | null | Error;

/**
 * Reads the reply that starts at `offset` of `buffer` (simple string, error, integer or bulk string):
 * the reply and where the next starts, or undefined while it has not all arrived.
 */
function replyAt(buffer: Buffer, offset: number): { reply: Reply; next: number } | undefined {
  const end = buffer.indexOf('\r\n', offset);
  if (end < 0) return undefined;
  const type = String.fromCharCode(buffer[offset]!);
  const head = buffer.toString('utf8', offset + 1, end);
  const next = end + 2;
  if (type === '+') return { reply: head, next };
  if (type === '-') return { reply: new Error(`redis: ${head}`), next };
  if (type === ':') return { reply: Number(head), next };
  if (type === '$') {
    const length = Number(head);
    if (length < 0) return { reply: null, next };
    if (buffer.length < next + length + 2) return undefined;
    return { reply: buffer.toString('utf8', next, next + length), next: next + length + 2 };
  }
  return { reply: new Error(`unexpected redis reply: ${head}`), next: buffer.length };
}

/**
 * Sends `commands` to a Redis server over one connection, in order, and returns their replies; rejects
 * with the first error reply. One connection matters where a command answers for the ones before it
 * on the same connection: `WAIT` counts the replicas that acknowledged this connection's last write
 * (on a connection that wrote nothing it counts every replica online, caught up or not).
 * The toolkit's own admin channel: no client library, no SDK.
 */
export function redisCommands(port: number, commands: readonly (readonly string[])[], timeoutMs = 3000): Promise<(string | number | null)[]> {
  const name = commands.map((c) => c[0]).join('+');
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    let buffer = Buffer.alloc(0);
    let offset = 0;
    const replies: (string | number | null)[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`redis ${name} on port ${port} timed out`));
    }, timeoutMs);
    const finish = (error?: Error) => {
      clearTimeout(timer);
      socket.destroy();
      if (error) reject(error);
      else resolve(replies);
    };
    socket.on('connect', () => {
      socket.write(commands.map((args) => `*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`).join(''));
    });
    socket.on('data', (chunk) => {
      buffer = Buffer.concat([buffer, chunk]);
      for (let read = replyAt(buffer, offset); read !== undefined; read = replyAt(buffer, offset)) {
        offset = read.next;
        if (read.reply instanceof Error) return finish(read.reply);
        replies.push(read.reply);
        if (replies.length === commands.length) return finish();
      }
    });
    socket.on('error', (err) => finish(err));
  });
}

/**
 * Sends one command to a Redis server over RESP and returns its reply (simple string, integer or
 * bulk string); rejects with an error reply's text.
 */
export async function redisCommand(port: number, args: readonly string[], timeoutMs = 3000): Promise<string | number | null> {
  const [reply] = await redisCommands(port, [args], timeoutMs);
  return reply!;
}
