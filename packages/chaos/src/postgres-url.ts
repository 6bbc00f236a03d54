import net from 'node:net';

/** The loopback default: PostgreSQL 127.0.0.1:5432, user postgres, database test. */
export const DEFAULT_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/test';

/** True when something accepts TCP connections at host:port within `timeoutMs`. */
export function tcpAnswers(host: string, port: number, timeoutMs = 1500): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

export class ServiceUnavailableError extends Error {
  override readonly name = 'ServiceUnavailableError';
}

/**
 * Finds PostgreSQL: `DATABASE_URL` if set (it must answer), else the loopback default if it answers,
 * else a testcontainers PostgreSQL when a Docker engine is reachable, else a clear error.
 */
export async function resolvePostgres(env: NodeJS.ProcessEnv = process.env): Promise<{ url: string; stop: () => Promise<void> }> {
  const given = env['DATABASE_URL'];
  if (given !== undefined && given !== '') {
    let url: URL;
    try {
      url = new URL(given);
    } catch {
      throw new ServiceUnavailableError(`DATABASE_URL is not a valid URL (${JSON.stringify(given)}): set it to postgres://user@127.0.0.1:5432/db`);
    }
    if (!['127.0.0.1', 'localhost', '[::1]', '::1'].includes(url.hostname)) {
      throw new ServiceUnavailableError(`the simulation only sends traffic to loopback, and DATABASE_URL points at ${url.hostname}: use a PostgreSQL on 127.0.0.1`);
    }
    if (!(await tcpAnswers(url.hostname, Number(url.port || 5432)))) {
      throw new ServiceUnavailableError(`PostgreSQL at DATABASE_URL (${url.hostname}:${url.port || 5432}) does not answer: start it or fix DATABASE_URL`);
    }
    return { url: given, stop: async () => {} };
  }
  if (await tcpAnswers('127.0.0.1', 5432)) return { url: DEFAULT_DATABASE_URL, stop: async () => {} };
  try {
    const { PostgreSqlContainer } = (await import('@testcontainers/postgresql')) as typeof import('@testcontainers/postgresql');
    const container = await new PostgreSqlContainer('postgres:15-alpine').start();
    return { url: container.getConnectionUri(), stop: async () => void (await container.stop()) };
  } catch {
    throw new ServiceUnavailableError(
      'no PostgreSQL: set DATABASE_URL, or run one on 127.0.0.1:5432 (user postgres, database test), or start Docker for testcontainers',
    );
  }
}
