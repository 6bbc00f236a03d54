import { readFileSync } from 'node:fs';
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { freePort } from './ports.js';

describe('freePort', () => {
  it('picks ports below the kernel’s ephemeral range (where no outgoing connection takes them), each free to bind', async () => {
    const [low] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    const ports = await Promise.all(Array.from({ length: 20 }, () => freePort()));
    for (const port of ports) {
      expect(port).toBeGreaterThanOrEqual(10_000);
      expect(port).toBeLessThan(low!);
      const server = net.createServer();
      await new Promise<void>((resolve, reject) => server.once('error', reject).listen(port, '127.0.0.1', resolve));
      await new Promise((r) => server.close(r));
    }
  });

  it('never hands one port out twice in a process while its server may not have bound it yet', async () => {
    // 600 picks at random below the ephemeral range (about 22,000 ports here) would repeat one with
    // a chance of 1 - 0.03 % were they not remembered.
    // One after another: each port is free again (unbound) when the next is picked.
    const ports: number[] = [];
    for (let i = 0; i < 600; i++) ports.push(await freePort());
    expect(new Set(ports).size).toBe(ports.length);
  });
});
