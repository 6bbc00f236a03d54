import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { trackChild } from '../process/child-registry.js';
import { freePort, waitForPort } from '../ports.js';
import { startFaultProxy, type FaultProxy } from '../fault-proxy.js';
import { etcdApi, type EtcdMemberStatus } from './etcd-api.js';
import { expectListening, ownerOfConnection } from '../process/socket-owner.js';

/**
 * A real etcd cluster of supervised members on loopback ports, each a process of Debian's
 * `etcd-server`, with the faults a lease store must survive: the leader killed (SIGKILL) or frozen
 * (SIGSTOP), a member cut off behind its fault proxies, quorum lost, members restarted with or
 * without their data directory.
 *
 * Every member is reached through two fault proxies: one in front of its client port (what the
 * SDK's clients are given) and one in front of its peer port (what the other members are told to
 * dial). A partition cuts both of the member's proxies and makes the others' peer proxies refuse the
 * connections its process makes (told apart by /proc): no client and no raft message crosses.
 */
export interface EtcdMember {
  readonly name: string;
  /** Where clients reach it, through its client proxy. */
  readonly clientUrl: string;
  /** Its own client port, bypassing the proxy (for the supervisor's status calls; plain HTTP even under `clientTls`). */
  readonly directClientUrl: string;
  readonly running: boolean;
  readonly paused: boolean;
  readonly pid: number | undefined;
  /** SIGKILL, waiting for the exit. */
  kill(): Promise<void>;
  pause(): void;
  resume(): void;
  /** Starts it again on its data directory (a crash and a restart). */
  start(): Promise<void>;
}

export interface EtcdCluster {
  readonly members: readonly EtcdMember[];
  /** Every member's client URL (through the proxies): what a client is configured with. */
  readonly endpoints: readonly string[];
  /** The member that leads now, asked of every running member; null while none does. */
  leader(timeoutMs?: number): Promise<EtcdMember | null>;
  /** Waits until a leader is elected and answers, and returns it. */
  waitForLeader(timeoutMs?: number): Promise<EtcdMember>;
  /** Each running member's status (member id, leader id, raft term, revision), by name. */
  statuses(timeoutMs?: number): Promise<Map<string, EtcdMemberStatus>>;
  /** Cuts the member off from the others and from clients, both ways (Linux: needs /proc). */
  partition(member: EtcdMember): void;
  heal(member: EtcdMember): void;
  /**
   * The operator's answer to a lost disk: the member is removed from the cluster, its data
   * directory wiped, and it joins again as a new member (a new id) with an empty log.
   */
  replaceWithEmptyDataDir(member: EtcdMember): Promise<void>;
  /** Kills every member and removes every data directory. */
  stop(): Promise<void>;
}

export interface EtcdClusterOptions {
  /** How many members (default 3). */
  readonly size?: number;
  /** Raft heartbeat and election timeout, ms (etcd's defaults: 100 and 1000). */
  readonly heartbeatMs?: number;
  readonly electionTimeoutMs?: number;
  /**
   * Serve clients over TLS (`https://` endpoints): the server certificate and key, and when
   * `clientCertAuth` the CA whose client certificates the members require. Raft between members
   * stays plain, and each member also serves plain HTTP on a port of its own for the supervisor's
   * status calls (`directClientUrl`), so the toolkit needs no TLS client of its own.
   */
  readonly clientTls?: { readonly certFile: string; readonly keyFile: string; readonly trustedCaFile?: string; readonly clientCertAuth?: boolean };
}

/** The etcd binary of Debian's `etcd-server` (or one on the usual paths). */
export function etcdBinary(): string {
  for (const dir of ['/usr/bin', '/usr/local/bin', '/usr/sbin']) {
    const path = join(dir, 'etcd');
    if (existsSync(path)) return path;
  }
  throw new Error('no etcd binary: install etcd-server (Debian: apt-get install etcd-server)');
}

interface MemberPorts {
  readonly name: string;
  readonly clientPort: number;
  readonly peerPort: number;
  /** Where the supervisor's calls go: the client port itself, or a plain one beside it under TLS. */
  readonly supervisorPort: number;
  readonly clientProxy: FaultProxy;
  readonly peerProxy: FaultProxy;
}

/**
 * Starts the cluster and resolves once it has a leader. Its ports are picked free and bound by etcd
 * a moment later; on a busy machine another process's connection can take one in between, so a
 * start that fails on a taken port is tried again on new ones.
 */
export async function startEtcdCluster(options: EtcdClusterOptions = {}): Promise<EtcdCluster> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startEtcdClusterOnce(options);
    } catch (err) {
      if (attempt === 3 || !(err instanceof Error && err.message.includes('address already in use'))) throw err;
    }
  }
}

/** What etcd said last before it gave up at start (its log is JSON lines), or where to look. */
function lastFatal(logPath: string): string {
  try {
    const lines = readFileSync(logPath, 'utf8').trim().split('\n');
    const last = lines.reverse().find((l) => l.includes('"level":"fatal"') || l.includes('"level":"error"')) ?? lines[0] ?? '';
    const entry = JSON.parse(last) as { msg?: string; error?: string };
    return `${entry.msg ?? ''}${entry.error === undefined ? '' : `: ${entry.error}`} (${logPath})`;
  } catch {
    return `see ${logPath}`;
  }
}

async function startEtcdClusterOnce(options: EtcdClusterOptions): Promise<EtcdCluster> {
  const binary = etcdBinary();
  const size = options.size ?? 3;
  const heartbeatMs = options.heartbeatMs ?? 100;
  const electionTimeoutMs = options.electionTimeoutMs ?? 1000;
  const root = mkdtempSync(join(tmpdir(), 'fenced-etcd-'));
  const clusterToken = `fenced-${randomBytes(4).toString('hex')}`;
  const tls = options.clientTls;
  const clientScheme = tls === undefined ? 'http' : 'https';
  const ports: MemberPorts[] = [];
  for (let i = 0; i < size; i++) {
    const clientPort = await freePort();
    const peerPort = await freePort();
    const supervisorPort = tls === undefined ? clientPort : await freePort();
    ports.push({ name: `m${i}`, clientPort, peerPort, supervisorPort, clientProxy: await startFaultProxy(clientPort), peerProxy: await startFaultProxy(peerPort) });
  }
  const peerUrl = (p: MemberPorts) => `http://127.0.0.1:${p.peerProxy.port}`;
  // Which members the cluster has now: a replaced member joins with the list of its day.
  let initialCluster = ports.map((p) => `${p.name}=${peerUrl(p)}`).join(',');

  const members: Array<EtcdMember & { ports: MemberPorts; launch(state: 'new' | 'existing'): Promise<void> }> = ports.map((p) => {
    const dataDir = join(root, p.name);
    let child: ChildProcess | undefined;
    let paused = false;
    const exited = (c: ChildProcess) => new Promise<void>((resolve) => (c.exitCode !== null || c.signalCode !== null ? resolve() : c.once('exit', () => resolve())));
    let state: 'new' | 'existing' = 'new';
    const member = {
      name: p.name,
      ports: p,
      clientUrl: `${clientScheme}://127.0.0.1:${p.clientProxy.port}`,
      directClientUrl: `http://127.0.0.1:${p.supervisorPort}`,
      get running() {
        return child !== undefined && child.exitCode === null && child.signalCode === null;
      },
      get paused() {
        return paused;
      },
      get pid() {
        return child?.pid;
      },
      async kill() {
        const c = child;
        child = undefined;
        paused = false;
        if (c === undefined || c.exitCode !== null || c.signalCode !== null) return;
        const done = exited(c);
        c.kill('SIGCONT');
        c.kill('SIGKILL');
        await done;
      },
      pause() {
        if (child?.pid === undefined || paused) return;
        process.kill(child.pid, 'SIGSTOP');
        paused = true;
      },
      resume() {
        if (child?.pid === undefined || !paused) return;
        process.kill(child.pid, 'SIGCONT');
        paused = false;
      },
      async start() {
        await member.launch(state);
      },
      async launch(clusterState: 'new' | 'existing') {
        if (member.running) return;
        state = clusterState;
        mkdirSync(dataDir, { recursive: true });
        const args = [
          `--name=${p.name}`,
          `--data-dir=${dataDir}`,
          `--listen-client-urls=${clientScheme}://127.0.0.1:${p.clientPort}${tls === undefined ? '' : `,http://127.0.0.1:${p.supervisorPort}`}`,
          `--advertise-client-urls=${clientScheme}://127.0.0.1:${p.clientProxy.port}`,
          `--listen-peer-urls=http://127.0.0.1:${p.peerPort}`,
          `--initial-advertise-peer-urls=${peerUrl(p)}`,
          `--initial-cluster=${initialCluster}`,
          `--initial-cluster-state=${clusterState}`,
          `--initial-cluster-token=${clusterToken}`,
          `--heartbeat-interval=${heartbeatMs}`,
          `--election-timeout=${electionTimeoutMs}`,
          '--logger=zap',
          `--log-outputs=${join(root, `${p.name}.log`)}`,
          ...(tls === undefined ? [] : [`--cert-file=${tls.certFile}`, `--key-file=${tls.keyFile}`]),
          ...(tls?.trustedCaFile === undefined ? [] : [`--trusted-ca-file=${tls.trustedCaFile}`]),
          ...(tls?.clientCertAuth === true ? ['--client-cert-auth'] : []),
        ];
        const c = spawn(binary, args, { stdio: 'ignore' });
        child = c;
        trackChild(c);
        const failed = new Promise<never>((_, reject) => {
          c.once('error', (err) => reject(new Error(`cannot start etcd ${p.name}: ${err.message}`)));
          c.once('exit', (code, signal) => reject(new Error(`etcd ${p.name} exited at start (${signal ?? code}): ${lastFatal(join(root, `${p.name}.log`))}`)));
        });
        failed.catch(() => {});
        await Promise.race([Promise.all([waitForPort(p.clientPort, 30_000), waitForPort(p.supervisorPort, 30_000)]), failed]);
        // Whoever answers must be this member (a port taken while it was down: see expectListening).
        await Promise.race([Promise.all([p.clientPort, p.supervisorPort].map((port) => expectListening(c.pid!, port, `etcd ${p.name}`))), failed]);
        state = 'existing';
      },
    };
    return member;
  });

  const api = (member: EtcdMember) => etcdApi(member.directClientUrl);
  const statuses = async (timeoutMs = 1000) => {
    const answers = await Promise.all(
      members.map(async (m) => {
        if (!m.running || m.paused) return null;
        const status = await api(m).status(timeoutMs).catch(() => null);
        return status === null ? null : ([m.name, status] as const);
      }),
    );
    return new Map(answers.filter((a): a is NonNullable<typeof a> => a !== null));
  };
  const leader = async (timeoutMs = 1000) => {
    const all = await statuses(timeoutMs);
    for (const m of members) {
      const s = all.get(m.name);
      // A member that reports itself as leader, with another member confirming it (a partitioned
      // old leader may still believe it leads for an election timeout).
      if (s !== undefined && s.leader === s.memberId) {
        const confirmed = [...all.values()].filter((o) => o.leader === s.memberId).length;
        if (confirmed * 2 > members.length) return m;
      }
    }
    return null;
  };

  const cluster: EtcdCluster = {
    members,
    endpoints: members.map((m) => m.clientUrl),
    leader,
    statuses,
    async waitForLeader(timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const found = await leader();
        if (found !== null) return found;
        if (Date.now() > deadline) throw new Error(`etcd elected no leader within ${timeoutMs} ms`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    partition(member) {
      const m = members.find((x) => x === member)!;
      m.ports.clientProxy.setMode({ kind: 'cut' });
      m.ports.peerProxy.setMode({ kind: 'cut' });
      // What it dials to the others goes through their proxies too: each of them refuses (and
      // resets) the connections that come from its process. Both directions of every link are cut.
      for (const other of members) {
        if (other === m) continue;
        const proxy = other.ports.peerProxy;
        proxy.refuseFrom(async (clientPort) => m.pid !== undefined && (await ownerOfConnection(clientPort, proxy.port, [m.pid])) !== undefined);
      }
    },
    heal(member) {
      const m = members.find((x) => x === member)!;
      m.ports.clientProxy.setMode({ kind: 'pass' });
      m.ports.peerProxy.setMode({ kind: 'pass' });
      for (const other of members) if (other !== m) other.ports.peerProxy.refuseFrom(null);
    },
    async replaceWithEmptyDataDir(member) {
      const m = members.find((x) => x === member)!;
      await m.kill();
      // Through any member that answers: one restarted a moment ago may not serve yet, and etcd
      // refuses to add a member while that would leave it without a quorum of active members.
      const viaSurvivor = async <T>(what: string, call: (api: ReturnType<typeof etcdApi>) => Promise<T>): Promise<T> => {
        const deadline = Date.now() + 30_000;
        for (;;) {
          for (const x of members) {
            if (x === m || !x.running || x.paused) continue;
            try {
              return await call(api(x));
            } catch (err) {
              if (Date.now() > deadline) throw new Error(`etcd ${what}: ${String(err)}`);
            }
          }
          await new Promise((r) => setTimeout(r, 200));
        }
      };
      const list = await viaSurvivor('member list', (a) => a.memberList(2000));
      const old = list.find((x) => x.name === m.name || x.peerURLs.includes(peerUrl(m.ports)));
      if (old !== undefined) await viaSurvivor('member remove', (a) => a.memberRemove(old.id, 2000));
      await viaSurvivor('member add', (a) => a.memberAdd(peerUrl(m.ports), 2000));
      rmSync(join(root, m.name), { recursive: true, force: true });
      initialCluster = members.map((x) => `${x.name}=${peerUrl(x.ports)}`).join(',');
      await m.launch('existing');
    },
    async stop() {
      await Promise.all(members.map((m) => m.kill()));
      await Promise.all(ports.flatMap((p) => [p.clientProxy.close(), p.peerProxy.close()]));
      rmSync(root, { recursive: true, force: true });
    },
  };

  try {
    await Promise.all(members.map((m) => m.launch('new')));
    await cluster.waitForLeader(60_000);
  } catch (err) {
    await cluster.stop().catch(() => undefined);
    throw err;
  }
  return cluster;
}
