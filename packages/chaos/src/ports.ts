import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Where a server the toolkit starts gets its port. A port is picked free here and bound by the
 * server a moment later, in another process; a port from the kernel's ephemeral range can be taken
 * in between by any outgoing connection on the machine (every client of every test picks its local
 * port there), and the server then fails to bind, or worse, the wait for its port finds the other
 * socket. Below the ephemeral range only a listener asking for that very port can take it: ports are
 * picked at random there and checked by binding them.
 */
const LOWEST = 10_000;

/** Where the kernel's ephemeral range starts (Linux), or the IANA one where it cannot be read. */
function ephemeralLow(): number {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    if (Number.isInteger(low)) return low;
  } catch {
    // not Linux: fall through
  }
  return 49_152;
}

/** Binds 127.0.0.1:`port` (0: the kernel picks) and frees it again; the port, or null if it was taken. */
function tryPort(port: number): Promise<number | null> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', (err: NodeJS.ErrnoException) => (err.code === 'EADDRINUSE' || err.code === 'EACCES' ? resolve(null) : reject(err)));
    server.listen(port, '127.0.0.1', () => {
      const { port: bound } = server.address() as net.AddressInfo;
      server.close(() => resolve(bound));
    });
  });
}

/**
 * Where the ports handed out are reserved, one file per port holding its owner's pid, so that no two
 * processes on the machine hand one port out while both could use it. A port is free to bind from its
 * pick until its server binds it, and again whenever that server is down (killed, to be restarted on
 * the same port): another process's pick in that moment bound it first, and the restarted server's
 * wait for its port then found the other server and went on with it (a Sentinel test's replica was
 * rewritten under it, seen in the unit project's three workers beside four CPU hogs). A reservation
 * lasts as long as its process: servers are started and restarted until then.
 */
const RESERVATIONS = join(tmpdir(), 'fenced-ports');

/**
 * The ports this process reserved, released when it exits normally; a reservation left by a process
 * that was killed (as test workers are) is taken over once its pid runs no more.
 */
const reserved = new Set<number>();
let releaseAtExit = false;

/** Whether the process `pid` runs (one we may not signal runs too). */
function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Creates the reservation file, or answers false when it exists already. */
function create(file: string): boolean {
  try {
    writeFileSync(file, String(process.pid), { flag: 'wx' });
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw error;
  }
}

/**
 * Replaces the reservation `file` of `owner`, a process that ended, with this process's. One process
 * at a time (a directory beside it is the lock: creating one is atomic): two that both found it stale
 * would otherwise each remove the file and create their own, the second over the first's. A lock left
 * by a process killed while it held it keeps that port out of use, which costs nothing.
 */
function takeOver(file: string, owner: number): boolean {
  const lock = `${file}.takeover`;
  try {
    mkdirSync(lock);
  } catch {
    return false;
  }
  try {
    let now: number;
    try {
      now = Number(readFileSync(file, 'utf8'));
    } catch {
      now = owner; // removed since: nobody holds it
    }
    if (now !== owner) return false; // taken over already, by the one that held the lock before
    rmSync(file, { force: true });
    return create(file);
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

/**
 * Reserves `port` for this process in `dir`: true when it is now this process's, false when a running
 * process holds it (this one included). A reservation whose process has ended is taken over.
 */
export function reservePort(port: number, dir: string = RESERVATIONS): boolean {
  mkdirSync(dir, { recursive: true });
  const file = join(dir, String(port));
  if (!create(file)) {
    let owner: number;
    try {
      owner = Number(readFileSync(file, 'utf8'));
    } catch {
      return false; // released or taken over by its owner right now: not ours to judge
    }
    // An empty file is one another process is writing (create, then write): held.
    if (!Number.isInteger(owner) || owner <= 0 || owner === process.pid || running(owner)) return false;
    if (!takeOver(file, owner)) return false;
  }
  if (dir === RESERVATIONS) {
    reserved.add(port);
    if (!releaseAtExit) {
      releaseAtExit = true;
      process.once('exit', () => {
        for (const p of reserved) rmSync(join(RESERVATIONS, String(p)), { force: true });
      });
    }
  }
  return true;
}

/** A free TCP port on 127.0.0.1, below the ephemeral range when there is room (see above). */
export async function freePort(): Promise<number> {
  const low = ephemeralLow();
  if (low - LOWEST >= 1000) {
    for (let attempt = 0; attempt < 50; attempt++) {
      const candidate = LOWEST + Math.floor(Math.random() * (low - LOWEST));
      if (!reservePort(candidate)) continue;
      const port = await tryPort(candidate);
      if (port !== null) return port;
    }
  }
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = await tryPort(0);
    if (port === null) break;
    if (reservePort(port)) return port;
  }
  throw new Error('no free port on 127.0.0.1');
}

/** Resolves once something accepts TCP connections on the port, or rejects after `timeoutMs`. */
export async function waitForPort(port: number, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const open = await new Promise<boolean>((resolve) => {
      const socket = net.connect({ host: '127.0.0.1', port }, () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => {
        socket.destroy();
        resolve(false);
      });
    });
    if (open) return;
    if (Date.now() > deadline) throw new Error(`nothing listens on 127.0.0.1:${port} after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
