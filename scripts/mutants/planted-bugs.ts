/**
 * Our planted-bug suite: each bug is a small patch of the kind real lease and fencing code has shipped
 * with, and the tests that must catch it. `pnpm mutants` applies each one to a scratch copy of the
 * repository and runs those tests there (see run-mutants.ts). docs/planted-bugs.md lists them.
 */
export interface PlantedBug {
  /** Short, stable: the table's first column. */
  readonly id: string;
  /** The layer whose promise it breaks. */
  readonly layer: 'lease' | 'scheduler' | 'guard' | 'dedupe' | 'handler';
  /** What goes wrong, in one line. */
  readonly bug: string;
  /** The file patched, from the repository root. */
  readonly file: string;
  /** The exact text replaced: it must occur exactly once in the file, or the bug no longer applies. */
  readonly find: string;
  readonly replace: string;
  /** The test files that must catch it (vitest `unit` project filters). */
  readonly tests: readonly string[];
  /**
   * The simulation scenario that must catch it too, in one short guarded run (targeted-sim.ts): the
   * second net, for bugs whose harm the simulation's checks can see.
   */
  readonly sim?: string;
}

const MIGRATIONS = 'packages/consumer-guard/src/postgres/migrations';

export const PLANTED_BUGS: readonly PlantedBug[] = [
  {
    id: 'acquire-no-expiry',
    layer: 'lease',
    bug: 'the acquire script sets the lease without PX: a crashed leader holds it forever',
    file: 'packages/coordinator/src/lease/lua/acquire-2.lua',
    find: "redis.call('SET', KEYS[1], token .. ':' .. ARGV[1], 'PX', ARGV[2])",
    replace: "redis.call('SET', KEYS[1], token .. ':' .. ARGV[1])",
    tests: ['packages/coordinator/src/lease/coordinator.redis.test.ts'],
  },
  {
    id: 'renew-any-holder',
    layer: 'lease',
    bug: "the renew script extends whoever holds the lease, not only its caller's term",
    file: 'packages/coordinator/src/lease/lua/renew-1.lua',
    find: "if redis.call('GET', KEYS[1]) == ARGV[1] then",
    replace: "if redis.call('GET', KEYS[1]) then",
    tests: ['packages/coordinator/src/lease/coordinator.redis.test.ts'],
  },
  {
    id: 'release-any-holder',
    layer: 'lease',
    bug: 'the release script deletes the lease without checking that the caller holds it',
    file: 'packages/coordinator/src/lease/lua/release-2.lua',
    find: "if redis.call('GET', KEYS[1]) == ARGV[1] then",
    replace: "if redis.call('EXISTS', KEYS[1]) == 1 then",
    tests: ['packages/coordinator/src/lease/coordinator.redis.test.ts'],
  },
  {
    id: 'elect-after-deadline',
    layer: 'lease',
    bug: 'an acquire reply that arrives after the lease ended still makes its caller the leader',
    file: 'packages/coordinator/src/lease/coordinator.ts',
    find: "if (this.#state.kind !== 'standby' || this.#clock.now() >= deadline) {",
    replace: "if (this.#state.kind !== 'standby') {",
    tests: ['test/failpoints.test.ts', 'packages/coordinator/src/lease/coordinator.redis.test.ts'],
  },
  {
    id: 'regression-misread',
    layer: 'lease',
    bug: "a fence's \"ahead\" answer is read as unreachable: a repeated token is never repaired, the lease never elects again",
    file: 'packages/coordinator/src/lease/fence-verdict.ts',
    find: "isFencedError(answer.reason, 'FENCE_AHEAD')",
    replace: "isFencedError(answer.reason, 'STALE_TOKEN')",
    tests: ['packages/coordinator/src/lease/fence-verdict.test.ts', 'test/coordinator-fences.test.ts'],
    sim: 'redis-failover',
  },
  {
    id: 'dispatch-without-self-fence',
    layer: 'scheduler',
    bug: 'the scheduler dispatches pending fires without checking that its term is still current',
    file: 'packages/coordinator/src/scheduler/scheduler.ts',
    find: 'if (this.#coordinator.currentTerm() !== term) return;',
    replace: '',
    tests: ['packages/coordinator/src/scheduler/scheduler.redis.test.ts', 'test/scheduler-recovery.test.ts', 'test/scheduler-clock.test.ts', 'test/coordinator-pause.test.ts'],
    sim: 'catch-up-failover',
  },
  {
    id: 'record-any-lease',
    layer: 'scheduler',
    bug: "the record script checks that a lease exists, not that it is the caller's: a deposed leader moves the schedule",
    file: 'packages/coordinator/src/scheduler/lua/record-fire-2.lua',
    find: "if redis.call('GET', KEYS[1]) ~= ARGV[1] then",
    replace: "if redis.call('EXISTS', KEYS[1]) == 0 then",
    tests: ['packages/coordinator/src/scheduler/scheduler.redis.test.ts', 'test/scheduler-recovery.test.ts'],
  },
  {
    id: 'check-off-by-one',
    layer: 'guard',
    bug: 'the SQL check lets a token one below the fence through',
    file: `${MIGRATIONS}/000002.sql`,
    find: 'IF cur > p_token THEN',
    replace: 'IF cur > p_token + 1 THEN',
    tests: ['packages/consumer-guard/src/postgres/postgres-guard.pg.test.ts'],
    sim: 'pause',
  },
  {
    id: 'check-without-lock',
    layer: 'guard',
    bug: "the SQL check reads the fence without FOR SHARE: an advance can commit between a writer's check and its commit",
    file: `${MIGRATIONS}/000002.sql`,
    find: 'f.token >= p_token FOR SHARE;',
    replace: 'f.token >= p_token;',
    tests: ['packages/consumer-guard/src/postgres/concurrency.pg.test.ts'],
  },
  {
    id: 'advance-not-strict',
    layer: 'guard',
    bug: 'an election-time advance accepts a token equal to the fence: a repeated token passes as fresh',
    file: `${MIGRATIONS}/000001.sql`,
    find: 'WHERE f.token < EXCLUDED.token;',
    replace: 'WHERE f.token <= EXCLUDED.token;',
    tests: ['packages/consumer-guard/src/postgres/postgres-guard.pg.test.ts', 'test/coordinator-fences.test.ts'],
  },
  {
    id: 'mark-before-commit',
    layer: 'guard',
    bug: 'the Redis mark is raised before the PostgreSQL write commits: a write that rolls back leaves the mark ahead',
    file: 'packages/consumer-guard/src/combined-guard.ts',
    find: "      const result = await postgres.guardedWrite(token, fn, pgOptions);\n      if (failpoints.armed) await failpoints.hit('guard.committed-before-mark');\n      await raiseMark(resource, token);",
    replace: "      await raiseMark(resource, token);\n      const result = await postgres.guardedWrite(token, fn, pgOptions);\n      if (failpoints.armed) await failpoints.hit('guard.committed-before-mark');",
    tests: ['test/failpoints.test.ts'],
  },
  {
    id: 'mark-compared-as-text',
    layer: 'guard',
    bug: "the Redis guard compares tokens as strings: token 9 passes a mark of 10",
    file: 'packages/consumer-guard/src/redis/lua/guarded-write.lua',
    find: 'if mark and less(ARGV[1], mark) then',
    replace: 'if mark and ARGV[1] < mark then',
    tests: ['packages/consumer-guard/src/redis/redis-guard.redis.test.ts'],
  },
  {
    id: 'token-via-number',
    layer: 'guard',
    bug: 'a decimal token is parsed through Number: tokens past 2^53 round, and a lower one can compare equal',
    file: 'packages/shared/src/token.ts',
    find: "    if (input.length > 19 || !CANONICAL_DECIMAL.test(input)) {\n      throw new InvalidTokenError(input, `${JSON.stringify(input.slice(0, 40))} is not a canonical decimal in 1..2^63-1`);\n    }\n    value = BigInt(input);",
    replace: "    if (input.length > 19 || !CANONICAL_DECIMAL.test(input)) {\n      throw new InvalidTokenError(input, `${JSON.stringify(input.slice(0, 40))} is not a canonical decimal in 1..2^63-1`);\n    }\n    value = BigInt(Number(input));",
    tests: ['packages/shared/src/token.test.ts', 'packages/coordinator/src/lease/coordinator.redis.test.ts'],
  },
  {
    id: 'catch-up-off-by-one',
    layer: 'scheduler',
    bug: "the catch-up stops before a fire due exactly now: under misfire 'once' two fires go out where one stands for the lot",
    file: 'packages/coordinator/src/scheduler/catch-up.ts',
    find: '  while (at !== null && at <= now) {',
    replace: '  while (at !== null && at < now) {',
    tests: ['packages/coordinator/src/scheduler/catch-up.test.ts', 'packages/coordinator/src/scheduler/scheduler.redis.test.ts'],
  },
  {
    id: 'lead-on-partial-fences',
    layer: 'lease',
    bug: 'an election leads when only some fences answered: a fence it could not reach may hold a higher token',
    file: 'packages/coordinator/src/lease/fence-verdict.ts',
    find: "return { verdict: unreachable.length > 0 ? { kind: 'unavailable' } : { kind: 'ok' }, ahead, unreachable };",
    replace: "return { verdict: unreachable.length === fences.length ? { kind: 'unavailable' } : { kind: 'ok' }, ahead, unreachable };",
    tests: ['packages/coordinator/src/lease/fence-verdict.test.ts', 'test/coordinator-fences.test.ts'],
  },
  {
    id: 'handler-without-precheck',
    layer: 'handler',
    bug: 'the wrapped handler skips its pre-check: a stale envelope starts the handler (side effects outside the database happen)',
    file: 'packages/consumer-guard/src/handler/wrap-handler.ts',
    find: '      await guard.precheck(token);',
    replace: '',
    tests: ['packages/consumer-guard/src/handler/wrap-handler.pg.test.ts'],
  },
  {
    id: 'signature-unchecked',
    layer: 'handler',
    bug: 'the wrapped handler parses a signed envelope without verifying its signature',
    file: 'packages/consumer-guard/src/handler/wrap-handler.ts',
    find: '      if (settings.keys !== undefined) verifyEnvelope(envelope, settings.keys);',
    replace: '',
    tests: ['packages/consumer-guard/src/handler/wrap-handler.pg.test.ts'],
  },
  {
    id: 'acquire-deadline-from-reply',
    layer: 'lease',
    bug: 'an election counts its lease from the reply, not from the send: a slow reply makes the node lead past the lease Redis holds',
    file: 'packages/coordinator/src/lease/coordinator.ts',
    find: 'const deadline = sentAt + this.ttlMs - this.driftMs;',
    replace: 'const deadline = receivedAt + this.ttlMs - this.driftMs;',
    tests: ['test/failpoints.test.ts', 'packages/coordinator/src/lease/coordinator.redis.test.ts'],
  },
  {
    id: 'renew-deadline-from-reply',
    layer: 'lease',
    bug: 'a renewal extends the lease from its reply, not from its send: a slow reply makes the node lead past the lease Redis holds',
    file: 'packages/coordinator/src/lease/coordinator.ts',
    find: 'state.deadline = Math.max(state.deadline, sentAt + this.ttlMs - this.driftMs);',
    replace: 'state.deadline = Math.max(state.deadline, receivedAt + this.ttlMs - this.driftMs);',
    tests: ['test/failpoints.test.ts', 'packages/coordinator/src/lease/coordinator.redis.test.ts'],
  },
  {
    id: 'renew-refusal-ignored',
    layer: 'lease',
    bug: 'a renew that Redis refuses (another term holds the lease) is retried instead of ending the term: two leaders until the deadline',
    file: 'packages/coordinator/src/lease/coordinator.ts',
    find: "    if (reply[0] !== 1) {\n      this.#loseLeadership(state, 'stolen');\n      return;\n    }",
    replace: '    if (reply[0] !== 1) {\n      this.#scheduleRenew(this.renewIntervalMs);\n      return;\n    }',
    tests: ['packages/coordinator/src/lease/coordinator.redis.test.ts', 'test/coordinator-pause.test.ts'],
  },
  {
    id: 'sentinel-unconfirmed',
    layer: 'lease',
    bug: 'on Sentinel, an election checks only that its connection is up, not that the sentinels name that server: a deposed primary that still answers elects a second leader',
    file: 'packages/coordinator/src/lease/coordinator.ts',
    find: 'if (this.#primary !== undefined && !(await this.#primary.names(repliedFrom, repliedAt))) {',
    replace: 'if (this.#primary !== undefined && repliedFrom === undefined && repliedAt >= 0) {',
    tests: ['test/redis-sentinel.test.ts'],
  },
  {
    id: 'due-by-local-clock',
    layer: 'scheduler',
    bug: "the scheduler reads due fires off the node's own wall clock, not the Redis server's: a node whose clock runs ahead fires early",
    file: 'packages/coordinator/src/scheduler/scheduler.ts',
    find: 'if (this.#coordinator.currentTerm() !== term) return this.#standDown();\n    const now = this.#coordinator.serverNow();',
    replace: 'if (this.#coordinator.currentTerm() !== term) return this.#standDown();\n    const now = Date.now();',
    tests: ['test/scheduler-clock.test.ts', 'packages/coordinator/src/scheduler/scheduler.redis.test.ts'],
    sim: 'clock-skew',
  },
  {
    id: 'recovered-from-future',
    layer: 'scheduler',
    bug: 'a new term trusts a last-applied fire dated in the future (a writer whose clock ran ahead) and skips the fires due until then',
    file: 'packages/coordinator/src/scheduler/resume.ts',
    find: "typeof at === 'number' && Number.isFinite(at) && at <= now && ",
    replace: "typeof at === 'number' && Number.isFinite(at) && ",
    tests: ['packages/coordinator/src/scheduler/resume.test.ts', 'test/scheduler-recovery.test.ts'],
  },
  {
    id: 'fire-id-per-second',
    layer: 'dedupe',
    bug: 'fire ids are cut to the second: two fires of a sub-second job share an id, and the second is dropped as a duplicate',
    file: 'packages/shared/src/fire-id.ts',
    find: 'const iso = new Date(scheduledAtMs).toISOString();',
    replace: 'const iso = new Date(Math.floor(scheduledAtMs / 1000) * 1000).toISOString();',
    tests: ['packages/shared/src/fire-id.test.ts', 'packages/coordinator/src/scheduler/scheduler.redis.test.ts'],
    sim: 'pause',
  },
  {
    id: 'check-before-begin',
    layer: 'dedupe',
    bug: 'the fence check and fire claim run before BEGIN, in their own transaction: a write that rolls back leaves its fire claimed, so the retry is dropped',
    file: 'packages/consumer-guard/src/postgres/session.ts',
    find: 'await connection.exec(`BEGIN ISOLATION LEVEL ${isolation.toUpperCase()}; ${inlineStatement(check)}`);',
    replace: 'await connection.exec(inlineStatement(check));\n    await connection.exec(`BEGIN ISOLATION LEVEL ${isolation.toUpperCase()}`);',
    tests: ['packages/consumer-guard/src/postgres/postgres-guard.pg.test.ts', 'packages/consumer-guard/src/handler/wrap-handler.pg.test.ts'],
  },
  {
    id: 'prune-newest-fires',
    layer: 'dedupe',
    bug: 'pruning deletes applied fires newer than the retention instead of older: a redelivered fire applies twice',
    file: 'packages/consumer-guard/src/postgres/admin.ts',
    find: 'WHERE applied_at < now() - make_interval',
    replace: 'WHERE applied_at > now() - make_interval',
    tests: ['packages/consumer-guard/src/handler/wrap-handler.pg.test.ts'],
  },
  {
    id: 'mark-equal-is-stale',
    layer: 'guard',
    bug: "the Redis fast path refuses a token equal to the mark: the leader's own second write is refused as stale",
    file: 'packages/consumer-guard/src/redis/redis-guard.ts',
    find: 'if (token < highest) throw stale(token, mark);',
    replace: 'if (token <= highest) throw stale(token, mark);',
    tests: ['packages/consumer-guard/src/redis/redis-guard.redis.test.ts', 'packages/consumer-guard/src/handler/wrap-handler.pg.test.ts'],
    sim: 'pause',
  },
  {
    id: 'precheck-fails-open',
    layer: 'handler',
    bug: "the handler's pre-check passes when Redis does not answer, without asking PostgreSQL: a stale fire starts its handler while Redis is down",
    file: 'packages/consumer-guard/src/combined-guard.ts',
    find: 'if (fastPath !== undefined && (await fastPath.check(resource, token))) return;',
    replace: 'if (fastPath !== undefined) {\n      await fastPath.check(resource, token);\n      return;\n    }',
    tests: ['packages/consumer-guard/src/handler/wrap-handler.pg.test.ts'],
  },
];
