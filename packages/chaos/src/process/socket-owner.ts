import { readdir, readFile, readlink } from 'node:fs/promises';

/**
 * Which of `pids` holds the loopback TCP connection from local port `localPort` to `remotePort`
 * (Linux: /proc/net/tcp gives the socket's inode, /proc/<pid>/fd shows who holds it), or undefined.
 * This is how a proxy on one port tells apart the processes that connect to it: on loopback they all
 * share one address. Both ports are matched, not the local one alone: Linux gives one ephemeral port
 * to several connections with different destinations.
 *
 * Asynchronous on purpose: on a loaded machine one lookup took 36 ms on average (up to 107 ms), and a
 * member cut off from its cluster dials its peers about 26 times a second. Read synchronously, that
 * kept the proxies' event loop busy 95 % of the time, so the healthy members' own traffic through
 * the same proxies missed raft's election timeout and they elected leaders over and over.
 */
export async function ownerOfConnection(localPort: number, remotePort: number, pids: readonly number[]): Promise<number | undefined> {
  const inode = socketInode(await tcpTableLines(), localPort, remotePort);
  return inode === undefined ? undefined : holderAmong(pids, new Set([`socket:[${inode}]`]));
}

/**
 * Throws unless process `pid` (a server this toolkit spawned) holds the listening socket on `port`.
 * A port that answers proves nothing by itself: a server that could not bind it (another process took
 * it while this one was down) exits, and a wait for the port finds the other process instead. The
 * error names the process that does listen there, when one can be seen. (Linux: the LISTEN entries
 * of /proc/net/tcp and tcp6 matched against /proc/<pid>/fd.)
 */
export async function expectListening(pid: number, port: number, what: string): Promise<void> {
  const sockets = listeningSockets(await tcpTableLines(), port);
  if ((await holderAmong([pid], sockets)) !== undefined) return;
  if (sockets.size === 0) throw new Error(`nothing listens on port ${port}: not the ${what} started (pid ${pid}), nor another process`);
  const everyone = (await readdir('/proc').catch(() => [] as string[])).filter((name) => /^\d+$/.test(name)).map(Number);
  const holder = await holderAmong(everyone, sockets);
  throw new Error(`port ${port} is answered by ${holder === undefined ? 'another process' : `another process (pid ${holder})`}, not the ${what} started (pid ${pid})`);
}

/** The listening sockets on `port` (any address), as /proc/<pid>/fd shows them: `socket:[inode]`. */
function listeningSockets(lines: readonly string[], port: number): Set<string> {
  const suffix = hexPort(port);
  const found = new Set<string>();
  for (const line of lines) {
    const fields = line.trim().split(/\s+/);
    // st 0A is LISTEN; the inode is the tenth field.
    if (fields[1]?.endsWith(suffix) && fields[3] === '0A' && fields[9] !== undefined && fields[9] !== '0') found.add(`socket:[${fields[9]}]`);
  }
  return found;
}

/** The first of `pids` that holds one of `sockets` (`socket:[inode]`), or undefined. */
async function holderAmong(pids: readonly number[], sockets: ReadonlySet<string>): Promise<number | undefined> {
  for (const pid of pids) if ((await socketTargets(pid)).some((target) => sockets.has(target))) return pid;
  return undefined;
}

/** What each of `pid`'s file descriptors points at (`socket:[inode]` for a socket); empty once it is gone. */
async function socketTargets(pid: number): Promise<string[]> {
  const fds = await readdir(`/proc/${pid}/fd`).catch(() => [] as string[]);
  const targets = await Promise.all(fds.map((fd) => readlink(`/proc/${pid}/fd/${fd}`).catch(() => '')));
  return targets.filter((t) => t.startsWith('socket:['));
}

/**
 * How many established loopback TCP connections process `pid` holds to each of `remotePorts`
 * (Linux: its socket inodes from /proc/<pid>/fd, matched against /proc/net/tcp). What a benchmark
 * reports as connections per process per server, for servers that cannot name their clients.
 */
export async function connectionsTo(pid: number, remotePorts: readonly number[]): Promise<Map<number, number>> {
  const inodes = new Set((await socketTargets(pid)).map((t) => t.slice('socket:['.length, -1)));
  const counts = new Map(remotePorts.map((p) => [p, 0]));
  for (const line of await tcpTableLines()) {
    const fields = line.trim().split(/\s+/);
    // rem_address is the third field; st 01 is ESTABLISHED; the inode is the tenth field.
    const remotePort = Number.parseInt(fields[2]?.split(':')[1] ?? '', 16);
    if (fields[3] === '01' && counts.has(remotePort) && inodes.has(fields[9] ?? '')) counts.set(remotePort, counts.get(remotePort)! + 1);
  }
  return counts;
}

async function tcpTableLines(): Promise<string[]> {
  const tables = await Promise.all(['/proc/net/tcp', '/proc/net/tcp6'].map((table) => readFile(table, 'utf8').catch(() => ''))); // no IPv6: empty
  return tables.flatMap((text) => text.split('\n').slice(1));
}

/** The inode of the socket from `localPort` to `remotePort`; a closed one (TIME_WAIT) has inode 0. */
function socketInode(lines: readonly string[], localPort: number, remotePort: number): string | undefined {
  for (const line of lines) {
    const fields = line.trim().split(/\s+/);
    // local_address and rem_address are "<hex ip>:<hex port>"; the inode is the tenth field.
    if (fields[1]?.endsWith(hexPort(localPort)) && fields[2]?.endsWith(hexPort(remotePort)) && fields[9] !== undefined && fields[9] !== '0') return fields[9];
  }
  return undefined;
}

/** How /proc/net/tcp ends an address with `port`: `:` and four upper-case hex digits. */
function hexPort(port: number): string {
  return `:${port.toString(16).toUpperCase().padStart(4, '0')}`;
}
