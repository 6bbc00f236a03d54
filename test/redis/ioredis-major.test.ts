import { createRequire } from 'node:module';
import { Redis } from 'ioredis';
import { expect, it } from 'vitest';

// The `ioredis6` project swaps ioredis 6 in for the workspace's ioredis 5: this makes sure the swap
// happened (in every module, the SDK's included), so its green run means what it says.
const require = createRequire(import.meta.url);

it(`the SDK and the tests run on ioredis ${process.env['FENCED_IOREDIS_MAJOR']}`, async () => {
  const { Redis: Redis6 } = require('ioredis6') as typeof import('ioredis');
  expect(Redis === Redis6).toBe(process.env['FENCED_IOREDIS_MAJOR'] === '6');
  // The coordinator's own import of ioredis types is type-only; what it runs on is the client it is
  // handed. The Redis guard imports nothing of ioredis at run time either, so the client decides.
  const client = new Redis({ lazyConnect: true });
  expect(client.status).toBe('wait');
  client.disconnect();
});
