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

function socketInode(port: number): string | undefined {
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string;
    try {
      text = readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      // local_address is "<hex ip>:<hex port>"; the inode is the tenth field.
      if (fields[1]?.endsWith(`:${hexPort}`) && fields[9] !== undefined && fields[9] !== '0') return fields[9];
    }
  }
  return undefined;
}
