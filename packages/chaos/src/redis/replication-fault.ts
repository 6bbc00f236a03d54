import { redisCommand } from './redis-command.js';

/** The commands a replica syncs with; refused by the primary while replication is held. */
const SYNC_COMMANDS = ['psync', 'sync'] as const;

/**
 * Lossy replication on demand, for topologies whose replicas connect straight to their primary
 * (Cluster, Sentinel): the primary refuses the sync commands (its `default` user loses `psync` and
 * `sync`, which no client of the SDK sends) and its replicas' links are killed, so no replica can
 * sync again and every later write on the primary is missing from all of them. Asynchronous
 * replication losing acknowledged writes, made certain instead of unlikely. The replicas still count
 * as failover candidates for a while (Cluster: `cluster-replica-validity-factor`; Sentinel: its
 * down-after window), so the next failover promotes one without those writes.
 *
 * Both steps run on the primary, which runs its commands one at a time: a replica whose `PSYNC` came
 * before the refusal is a replica when the kill comes, and one whose `PSYNC` comes after is refused.
 * (Held on the replica's side instead, with a wrong `masterauth`, a replica that reconnected between
 * the two steps slipped through: Redis reconnects at once after a lost link, and a handshake sent
 * before the password changed either completed unheld, or hung until `repl-timeout` because the
 * replica reads its replies by the password it has now: seen beside four CPU hogs, 2026-12-07.)
 */
export async function holdReplicationOn(primaryPort: number): Promise<void> {
  await redisCommand(primaryPort, ['ACL', 'SETUSER', 'default', ...SYNC_COMMANDS.map((c) => `-${c}`)]);
  await redisCommand(primaryPort, ['CLIENT', 'KILL', 'TYPE', 'replica']);
}

/**
 * Lets replicas sync from the server on `primaryPort` again (a no-op on a server that restarted: the
 * refusal lives in its memory only). `PSYNC` only: `SYNC` stays refused. A replica refused `PSYNC`
 * falls back to the old `SYNC` at once, and one let through by a heal in that moment is synced the
 * pre-PSYNC way: it never acknowledges what it applied (`WAIT` never counts it), reports no offset
 * (Sentinel ranks it last for a promotion) and can resync only in full. Refused, it reconnects and
 * asks with `PSYNC` again (seen: a replica `online` to its primary, `slave_repl_offset:-1`, 15 s
 * without an acknowledgement, after a heal came between its `PSYNC` and its `SYNC`). No replica of
 * Redis 2.8 or later needs `SYNC`, nor does any client of the SDK.
 */
export async function releaseReplicationOn(primaryPort: number): Promise<void> {
  await redisCommand(primaryPort, ['ACL', 'SETUSER', 'default', '+psync']);
}
