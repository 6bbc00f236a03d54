import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { freePort, reservePort } from './ports.js';

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

  it('never hands out a port another running process reserved, and takes one over once that process ended', async () => {
    // What the unit project's workers are to each other: a server of one worker down for a restart
    // leaves its port free to bind, and another worker must not pick it then.
    const dir = mkdtempSync(join(tmpdir(), 'fenced-ports-test-'));
    const other = spawn('sleep', ['60'], { stdio: 'ignore' });
    try {
      writeFileSync(join(dir, '20001'), String(other.pid));
      expect(reservePort(20001, dir), 'a port a running process reserved').toBe(false);
      expect(reservePort(20002, dir), 'a port nobody reserved').toBe(true);
      expect(readFileSync(join(dir, '20002'), 'utf8')).toBe(String(process.pid));
      expect(reservePort(20002, dir), 'a port this process reserved already').toBe(false);
      writeFileSync(join(dir, '20003'), '');
      expect(reservePort(20003, dir), 'a reservation still being written').toBe(false);

      const ended = new Promise((r) => other.once('exit', r));
      other.kill('SIGKILL');
      await ended;
      // Another process taking the same stale reservation over right now (its lock is there): not ours.
      writeFileSync(join(dir, '20004'), String(other.pid));
      mkdirSync(join(dir, '20004.takeover'));
      expect(reservePort(20004, dir), 'a stale reservation another process is taking over').toBe(false);
      expect(readFileSync(join(dir, '20004'), 'utf8')).toBe(String(other.pid));

      expect(reservePort(20001, dir), 'a port whose reserving process ended').toBe(true);
      expect(readFileSync(join(dir, '20001'), 'utf8')).toBe(String(process.pid));
      expect(existsSync(join(dir, '20001.takeover')), 'its lock, gone with the takeover').toBe(false);
    } finally {
      other.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
