import net from 'node:net';

/**
 * Sends one command to a Redis server over RESP and returns the first reply (simple string, error
 * text, integer or bulk string). The toolkit's own admin channel: no client library, no SDK.
 */
export function redisCommand(port: number, args: readonly string[], timeoutMs = 3000): Promise<string | number | null> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    let buffer = Buffer.alloc(0);
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`redis ${args[0]} on port ${port} timed out`));
    }, timeoutMs);
    const finish = (value: string | number | null, error?: Error) => {
      clearTimeout(timer);
      socket.destroy();
      if (error) reject(error);
      else resolve(value);
    };
    socket.on('connect', () => {
      socket.write(`*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`);
    });
    socket.on('data', (chunk) => {
      buffer = Buffer.concat([buffer, chunk]);
      const text = buffer.toString('utf8');
      const end = text.indexOf('\r\n');
      if (end < 0) return;
      const type = text[0];
      const head = text.slice(1, end);
      if (type === '+') finish(head);
      else if (type === '-') finish(null, new Error(`redis: ${head}`));
      else if (type === ':') finish(Number(head));
      else if (type === '$') {
        const length = Number(head);
        if (length < 0) return finish(null);
        const start = Buffer.byteLength(text.slice(0, end + 2));
        if (buffer.length >= start + length + 2) finish(buffer.subarray(start, start + length).toString('utf8'));
      } else finish(null, new Error(`unexpected redis reply: ${head}`));
    });
    socket.on('error', (err) => finish(null, err));
  });
}
