import type { Fence, FencedLogger, LeaseLossReason, Token } from '@fenced/shared';
import type { MeterProvider } from '@opentelemetry/api';
import type { RedisClient } from '../redis-client.js';
import type { LeaseBackend } from '../store/lease-backend.js';
import type { Clock } from '../internal/clock.js';
import type { CoordinatorOptionsInput } from './coordinator-options.js';

// The coordinator's public types, apart from the state machine that produces them.

/** One term of leadership: what a leader acts with. */
export interface LeaderTerm {
  readonly token: Token;
  /** The lease value in the store, `<token>:<nodeId>`: what the store's checks of the lease compare. */
  readonly leaseValue: string;
  /** Aborts when this term ends (loss, stop, or deadline). */
  readonly signal: AbortSignal;
  /**
   * True when this election found the store behind a fence (it lost data): state kept there, such as
   * the scheduler's record of dispatched fires, may be missing too.
   */
  readonly regressed: boolean;
}

export interface CoordinatorEventMap {
  elected: [{ token: Token }];
  /**
   * `endedAt`: when the term ended, on the coordinator's monotonic clock (`performance.now()` unless
   * a clock was injected). For `deadline` it is the deadline itself: from that instant on
   * `isLeader()` answered false, though timers that run late (a loaded or paused process) deliver
   * this event after it.
   */
  lost: [{ token: Token; reason: LeaseLossReason; endedAt: number }];
  regression: [{ token: Token; fenceHighest: Token; resource: string; total: number }];
  error: [Error];
}

export type CreateCoordinatorOptions = Omit<CoordinatorOptionsInput, 'redis' | 'store' | 'fences' | 'logger' | 'clock' | 'meterProvider'> & {
  meterProvider?: MeterProvider;
  /** An ioredis `Redis` (single server or Sentinel) or `Cluster`, ioredis 5 or 6. Give this or `store`. */
  redis?: RedisClient;
  /** The lease's store: `redisLeases(redis)` or `postgresLeases({ pool })`. Give this or `redis`. */
  store?: LeaseBackend;
  fences?: readonly Fence[];
  logger?: FencedLogger;
  clock?: Clock;
};

