import { createGuard, type FenceStoreFactory } from '@fenced/consumer-guard';
import { mysqlFences } from '@fenced/consumer-guard/mysql';
import { postgresFences, type AuditEntry } from '@fenced/consumer-guard/postgres';
import { createRedisGuard } from '@fenced/consumer-guard/redis';
import { isFencedError, parseResource, parseToken, type Token } from '@fenced/shared';
import type { RedisTarget } from '../connections.js';
import { fenceGuardOn, installationLabel, type FenceDatabase } from '../fence-database.js';
import { CliError, ExitCode } from '../exit-codes.js';

export interface GuardInstallation {
  /** The database holding the fences: PostgreSQL (`--database`) or MySQL/MariaDB (`--mysql`). */
  readonly fences: FenceDatabase;
  /** The fast path's Redis, or null when the guard runs on PostgreSQL alone (`--no-redis`). */
  readonly redis: RedisTarget | null;
  readonly keyPrefix: string;
  readonly schema: string;
  readonly table: string;
}

export interface FenceState {
  readonly fence: string | null;
  readonly mark: string | null;
}

export interface FenceShow extends FenceState {
  readonly resource: string;
  readonly audit: readonly AuditEntryJson[];
}

export interface AuditEntryJson {
  readonly at: string;
  readonly from: string | null;
  readonly to: string;
  readonly actor: string;
  readonly reason: string;
}

export interface LowerResult {
  readonly resource: string;
  readonly before: FenceState;
  readonly after: FenceState;
  readonly audit: AuditEntryJson;
}

const auditJson = (e: AuditEntry): AuditEntryJson => ({ at: e.at.toISOString(), from: e.from?.toString() ?? null, to: e.to.toString(), actor: e.actor, reason: e.reason });

/** Input errors are the operator's to fix: one line, exit 2, nothing changed. */
function parsed<T>(what: string, parse: () => T): T {
  try {
    return parse();
  } catch (err) {
    throw new CliError(ExitCode.USAGE, `${what}: ${(err as Error).message}`);
  }
}

function guards(installation: GuardInstallation, resource: string) {
  const { fences, schema, table, keyPrefix } = installation;
  const store = fenceGuardOn(fences, resource, installation);
  const redis = installation.redis === null ? null : createRedisGuard({ redis: installation.redis.client, resource, keyPrefix });
  // The guard the service runs: its lowerFence also resets the Redis mark, as the admin act must.
  const storeFactory: FenceStoreFactory<unknown> = fences.kind === 'mysql' ? mysqlFences({ db: fences.pool, table }) : postgresFences({ db: fences.pool, schema, table });
  const admin = installation.redis === null ? store : createGuard({ store: storeFactory, redis: installation.redis.client, resource, keyPrefix });
  return { store, redis, admin };
}

async function stateOf(g: ReturnType<typeof guards>): Promise<FenceState> {
  const [fence, mark] = await Promise.all([g.store.highest(), g.redis?.highest() ?? Promise.resolve(null)]);
  return { fence: fence?.toString() ?? null, mark: mark?.toString() ?? null };
}

export async function showFence(installation: GuardInstallation, resourceInput: string, history: number): Promise<FenceShow> {
  const resource = parsed('--resource', () => parseResource(resourceInput));
  const g = guards(installation, resource);
  const [state, audit] = await Promise.all([stateOf(g), g.store.auditLog(resource, history)]);
  return { resource, ...state, audit: audit.map(auditJson) };
}

/**
 * The audited lowering: only downwards, only with an actor and a reason; the fence and the audit
 * row change in one transaction, then the Redis mark is reset to the new fence (a mark left above
 * it would keep refusing the tokens the lowering is meant to let through).
 */
export async function lowerFence(installation: GuardInstallation, request: { resource: string; to: string; actor: string; reason: string }): Promise<LowerResult> {
  const resource = parsed('--resource', () => parseResource(request.resource));
  const to: Token = parsed('--to', () => parseToken(request.to));
  for (const [flag, value] of [['--actor', request.actor], ['--reason', request.reason]] as const) {
    if (value.trim().length === 0) throw new CliError(ExitCode.USAGE, `${flag} is required and must not be blank: lowering a fence is an audited act`);
  }
  const g = guards(installation, resource);
  const before = await stateOf(g);
  if (before.fence === null) throw new CliError(ExitCode.USAGE, `resource ${JSON.stringify(resource)} has no fence in ${installationLabel(installation.fences, installation)}: nothing to lower`);
  if (to >= BigInt(before.fence)) throw new CliError(ExitCode.USAGE, `--to ${to} is not below the fence (${before.fence}): a fence only ever goes up by itself, and lowering is the only act this command does`);
  try {
    await g.admin.lowerFence({ resource, token: to, actor: request.actor, reason: request.reason });
  } catch (err) {
    if (isFencedError(err, 'INVALID_CONFIG')) throw new CliError(ExitCode.USAGE, (err as Error).message);
    throw err;
  }
  const [after, [audit]] = await Promise.all([stateOf(g), g.store.auditLog(resource, 1)]);
  return { resource, before, after, audit: auditJson(audit!) };
}

/** Deletes applied-fire records older than `olderThanMs`, on every resource of the installation. */
export async function pruneFires(installation: Omit<GuardInstallation, 'redis'>, olderThanMs: number): Promise<{ deleted: number; olderThanMs: number }> {
  const guard = fenceGuardOn(installation.fences, 'fenced-cli', installation);
  return { deleted: await guard.pruneAppliedFires(olderThanMs), olderThanMs };
}
