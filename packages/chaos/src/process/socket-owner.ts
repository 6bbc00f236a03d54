import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

/**
 * Which of `pids` owns the loopback TCP socket bound to local port `port` (Linux: /proc/net/tcp
 * gives the socket's inode, /proc/<pid>/fd shows who holds it), or undefined. This is how a proxy on
 * one port tells apart the processes that connect to it: on loopback they all share one address.
 */
export function ownerOfLocalPort(port: number, pids: readonly number[]): number | undefined {
  const inode = socketInode(port);
  if (inode === undefined) return undefined;
  const wanted = `socket:[${inode}]`;
  for (const pid of pids) {
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      try {
        if (readlinkSync(`/proc/${pid}/fd/${fd}`) === wanted) return pid;
      } catch {
        // closed meanwhile
      }
    }
  }
  return undefined;
}

/**
 * How many established loopback TCP connections process `pid` holds to each of `remotePorts`
 * (Linux: its socket inodes from /proc/<pid>/fd, matched against /proc/net/tcp). What a benchmark
 * reports as connections per process per server, for servers that cannot name their clients.
 */
export function connectionsTo(pid: number, remotePorts: readonly number[]): Map<number, number> {
  const inodes = new Set<string>();
  let fds: string[] = [];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    // gone
  }
  for (const fd of fds) {
    try {
      const target = readlinkSync(`/proc/${pid}/fd/${fd}`);
      if (target.startsWith('socket:[')) inodes.add(target.slice('socket:['.length, -1));
    } catch {
      // closed meanwhile
    }
  }
  const counts = new Map(remotePorts.map((p) => [p, 0]));
  for (const line of tcpTableLines()) {
    const fields = line.trim().split(/\s+/);
    // rem_address is the third field; st 01 is ESTABLISHED; the inode is the tenth field.
    const remotePort = Number.parseInt(fields[2]?.split(':')[1] ?? '', 16);
    if (fields[3] === '01' && counts.has(remotePort) && inodes.has(fields[9] ?? '')) counts.set(remotePort, counts.get(remotePort)! + 1);
  }
  return counts;
}

function tcpTableLines(): string[] {
  const lines: string[] = [];
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    try {
      lines.push(...readFileSync(table, 'utf8').split('\n').slice(1));
    } catch {
      // no IPv6
    }
  }
  return lines;
}

function socketInode(port: number): string | undefined {
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  for (const line of tcpTableLines()) {
    const fields = line.trim().split(/\s+/);
    // local_address is "<hex ip>:<hex port>"; the inode is the tenth field.
    if (fields[1]?.endsWith(`:${hexPort}`) && fields[9] !== undefined && fields[9] !== '0') return fields[9];
  }
  return undefined;
}
