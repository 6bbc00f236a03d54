import type { MeterProvider } from '@opentelemetry/api';
import { GuardMetrics } from '../metrics/guard-metrics.js';
import { createHash } from 'node:crypto';
import clusterKeySlot from 'cluster-key-slot';
import {
  InvalidMutationError,
  parseToken,
  StaleTokenError,
  type FencedLogger,
  type Token,
  type TokenInput,
} from '@fenced/shared';
import { emit, parseOptions, storedToken } from '@fenced/shared/internal';
import { redisGuardOptionsSchema, type RedisGuardOptionsInput } from './redis-guard-options.js';
import { defineScripts, sharedLuaScripts } from '@fenced/shared/internal';
import { luaScripts } from './lua/generated-lua.js';
import type { RedisClient } from './redis-client.js';
import type { FenceStoreKind } from '../fence-store.js';

/** A Redis command for `guardedWrite`: its keys apart from its other arguments (Redis Cluster needs them). */
export interface RedisMutation {
  /** The command name, for example `'HSET'`. */
  readonly command: string;
  /**
   * The keys it touches. On Redis Cluster they must share the mark's slot: build them with
   * `guard.key(...)` (a key from another slot is refused before anything is sent).
   */
  readonly keys: readonly string[];
  /** The other arguments, in order. */
  readonly args?: readonly (string | number)[];
}

/** The Redis side of the guard: the highest committed token per resource, as a fast path or for Redis data. */
export interface RedisGuard {
  readonly resource: string;
  /** The mark's key. */
  readonly markKey: string;
  /** A key in the same Redis Cluster slot as the mark, for data that `guardedWrite` mutates. */
  key(name: string): string;
  /**
   * Compares `token` with the mark in one round trip, without changing it.
   * @returns the mark (null when Redis holds none).
   * @throws {StaleTokenError} when `token` is below the mark.
   */
  check(token: TokenInput): Promise<Token | null>;
  /** The mark, or null when Redis holds none (never set, or lost). */
  highest(): Promise<Token | null>;
  /** Raises the mark to `token`; never lowers it. Returns the mark after the call. */
  raise(token: TokenInput): Promise<Token>;
  /**
   * Compare, raise, apply in one atomic script: for data that lives in Redis.
   * @returns each command's reply.
   * @throws {StaleTokenError} when `token` is below the mark; nothing was applied.
   * @throws {InvalidMutationError} for a command that cannot run fenced, an empty key, or on Redis
   *   Cluster a key outside the mark's slot; nothing was sent.
   * @example
   * ```ts
   * await redisGuard.guardedWrite(token, [
   *   { command: 'HSET', keys: [redisGuard.key('invoice:42')], args: ['status', 'sent'] },
   * ]);
   * ```
   */
  guardedWrite(token: TokenInput, mutations: readonly RedisMutation[]): Promise<unknown[]>;
  /** Deletes the mark: the audited recovery step for Redis after `lowerFence` in PostgreSQL. */
  forgetMark(): Promise<void>;
  /**
   * Appends a refused write to the resource's capped stream of refusals (key `refusalsKey`), which
   * `fenced status` shows. Best effort and never awaited by a write: it records a refusal already
   * decided, after the current turn of the event loop (the refusals of one turn in one call).
   * `guardedWrite` records its refusals; `check` is a read and records nothing (the
   * combined guard records its pre-check's refusals with their fire ids, and PostgreSQL's).
   */
  recordRefusal(token: Token, highest: Token, via: RefusedVia, fireId?: string): void;
  /** The stream of refusals: in the mark's slot. */
  readonly refusalsKey: string;
  /**
   * Sends the refusals not yet recorded and waits for every record on its way. Call it before you
   * close the Redis client: a refusal is recorded a turn of the event loop after it is returned, and
   * a `quit()` in between would drop it.
   */
  flush(): Promise<void>;
}

/**
 * The Redis guard as the layers inside the package use it: the same operations on a token already
 * parsed (the combined guard's fast path parses nothing; its caller did, once).
 */
export interface RedisMark extends Omit<RedisGuard, 'check' | 'raise' | 'guardedWrite'> {
  check(token: Token): Promise<Token | null>;
  raise(token: Token): Promise<Token>;
  guardedWrite(token: Token, mutations: readonly RedisMutation[]): Promise<unknown[]>;
}

/** How many refusals a resource's stream keeps. */
export const REFUSALS_KEPT = 100;
/** Who refused a write: the Redis mark, or the fence store of that kind. */
export type RefusedVia = 'redis' | FenceStoreKind;

/** A refusal as record-refusals-1.lua takes it: token, highest, via, fire id. */
const FIELDS_PER_REFUSAL = 4;

// Commands that have no business inside a fenced mutation (or cannot run in a script at all).
const FORBIDDEN = new Set(['EVAL', 'EVALSHA', 'EVAL_RO', 'EVALSHA_RO', 'FCALL', 'FCALL_RO', 'FUNCTION', 'SCRIPT', 'FLUSHALL', 'FLUSHDB', 'CONFIG', 'SHUTDOWN', 'MULTI', 'EXEC', 'WATCH', 'SUBSCRIBE', 'PSUBSCRIBE', 'BLPOP', 'BRPOP', 'BLMOVE', 'BZPOPMIN', 'BZPOPMAX', 'XREAD', 'XREADGROUP', 'WAIT', 'KEYS', 'DEBUG']);


/**
 * Creates the Redis guard of one resource.
 *
 * @throws {ConfigError} for bad options.
 */
export function createRedisGuard(input: CreateRedisGuardOptions): RedisGuard {
  const options = parseOptions('redis guard', redisGuardOptionsSchema, input);
  const metrics = new GuardMetrics({ meterProvider: input.meterProvider, resourceAttribute: options.metricResourceAttribute, resource: options.resource });
  const mark = redisMarkWith(input, metrics.observing(input.logger), metrics);
  // The public edge: each call's token parsed here, once.
  return Object.freeze({
    ...mark,
    check: async (token: TokenInput) => mark.check(parseToken(token)),
    raise: async (token: TokenInput) => mark.raise(parseToken(token)),
    guardedWrite: async (token: TokenInput, mutations: readonly RedisMutation[]) => mark.guardedWrite(parseToken(token), mutations),
  });
}

type CreateRedisGuardOptions = Omit<RedisGuardOptionsInput, 'redis' | 'logger' | 'meterProvider'> & { redis: RedisClient; logger?: FencedLogger; meterProvider?: MeterProvider };

/**
 * The Redis mark of one resource, reporting to `logger`, and timing its writes into `metrics` when given (the
 * combined guard's fast path passes its own logger, already counted, and no metrics).
 */
export function redisMarkWith(input: CreateRedisGuardOptions, logger: FencedLogger | undefined, metrics: GuardMetrics | null): RedisMark {
  const options = parseOptions('redis guard', redisGuardOptionsSchema, input);
  const redis = input.redis;
  // guarded-write has no fixed key count: the caller passes it first.
  const {
    raise: raiseScript,
    write: writeScript,
    refusals: refusalsScript,
  } = defineScripts(redis, { raise: sharedLuaScripts['raise-to'], write: luaScripts['guarded-write'], refusals: luaScripts['record-refusals'] });

  // Resource names are arbitrary text (braces included), so the hash tag is a digest of the name.
  const tag = `{${createHash('sha256').update(options.resource).digest('hex').slice(0, 24)}}`;
  const key = (name: string) => `${options.keyPrefix}:guard:${tag}:${name}`;
  const markKey = key('mark');
  // Outside the `guard:` namespace that guard.key() builds users' keys in, so no name of theirs can
  // collide with it; the same hash tag keeps it in the mark's slot. (Before 0.1.1 it was
  // `…:guard:{tag}::refusals`; fenced status reads both.)
  const refusalsKey = `${options.keyPrefix}:guard-refusals:${tag}`;
  const markSlot = clusterKeySlot(markKey);
  const resource = options.resource;
  // Redis Cluster refuses a script over keys of several slots (CROSSSLOT) after a round trip; a
  // single server runs it. Refusing here, on Cluster only, keeps the single-server behaviour.
  const checkSlot = redis.isCluster
    ? (k: string) => {
        if (clusterKeySlot(k) !== markSlot) throw new InvalidMutationError('cross-slot', `key ${JSON.stringify(k)} is not in the slot of the mark of ${JSON.stringify(resource)} (build it with guard.key(...))`);
      }
    : () => {};

  const stale = (token: Token, mark: string): StaleTokenError => {
    const highest = storedToken(mark);
    emit(logger, { type: 'token.rejected', resource, token, highest, via: 'redis' });
    return new StaleTokenError(resource, token, highest);
  };

  // Refusals are written after the caller has its answer, those of one turn of the event loop in one
  // call: a refusal costs its caller the check alone, and a storm of them (a stale leader's queue
  // draining) a write per turn rather than per refusal.
  let unrecorded: string[] = [];
  // Record calls on their way, so that flush() can wait for them before the client is closed.
  const inFlight = new Set<Promise<unknown>>();
  const flushRefusals = () => {
    if (unrecorded.length === 0) return;
    // The stream keeps the last REFUSALS_KEPT: older entries of a larger storm would be trimmed at once.
    const entries = unrecorded.slice(-FIELDS_PER_REFUSAL * REFUSALS_KEPT);
    unrecorded = [];
    const sent = (refusalsScript(refusalsKey, resource, String(REFUSALS_KEPT), ...entries) as Promise<unknown>).catch(() => {});
    inFlight.add(sent);
    void sent.finally(() => inFlight.delete(sent));
  };
  const recordRefusal = (token: Token, highest: Token, via: RefusedVia, fireId?: string): void => {
    if (unrecorded.length === 0) setImmediate(flushRefusals);
    unrecorded.push(token.toString(), highest.toString(), via, fireId ?? '');
  };

  return Object.freeze({
    resource,
    markKey,
    refusalsKey,
    recordRefusal,
    async flush() {
      flushRefusals();
      await Promise.all(inFlight);
    },
    key,
    async check(token) {
      // A read needs no script: GET is atomic, and the comparison is exact on bigints here.
      const mark = await redis.get(markKey);
      if (mark === null) return null;
      const highest = storedToken(mark);
      if (token < highest) throw stale(token, mark);
      return highest;
    },
    async highest() {
      const mark = await redis.get(markKey);
      return mark === null ? null : storedToken(mark);
    },
    async raise(token) {
      return storedToken(String(await raiseScript(markKey, token.toString())));
    },
    async guardedWrite(token, mutations) {
      const keys: string[] = [];
      const commands = mutations.map((m) => {
        const name = String(m.command).toUpperCase();
        if (!/^[A-Z][A-Z0-9_|.-]*$/.test(name) || FORBIDDEN.has(name)) throw new InvalidMutationError('forbidden-command', `command ${JSON.stringify(m.command)} cannot run fenced`);
        const k = m.keys.map((k) => {
          if (typeof k !== 'string' || k.length === 0) throw new InvalidMutationError('bad-key', 'keys must be non-empty strings');
          checkSlot(k);
          keys.push(k);
          return keys.length;
        });
        return { c: name, k, a: (m.args ?? []).map(String) };
      });
      const startedAt = performance.now();
      const [ok, body] = (await writeScript(1 + keys.length, markKey, ...keys, token.toString(), JSON.stringify(commands))) as [number, string];
      metrics?.write(startedAt, resource, ok === 1 ? 'accepted' : 'stale');
      if (ok !== 1) {
        const refusal = stale(token, body);
        recordRefusal(token, refusal.highest, 'redis');
        throw refusal;
      }
      emit(logger, { type: 'token.accepted', resource, token });
      const results = JSON.parse(body) as unknown;
      return Array.isArray(results) ? results : [];
    },
    async forgetMark() {
      await redis.del(markKey);
    },
  } satisfies RedisMark);
}
