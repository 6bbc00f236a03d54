import { clockStep } from './clock-step.js';
import { connectionReset } from './connection-reset.js';
import { crash } from './crash.js';
import { etcdLeaderLoss } from './etcd-leader-loss.js';
import { failoverMidCatchUp } from './failover-mid-catch-up.js';
import type { DeploymentFaultKind, ReplicaFaultKind } from './fault-kind.js';
import { lossyFailover } from './lossy-failover.js';
import { partition } from './partition.js';
import { pause } from './pause.js';
import { poolExhausted } from './pool-exhausted.js';
import { postgresDown } from './postgres-down.js';
import { postgresFailover } from './postgres-failover.js';
import { postgresRestart } from './postgres-restart.js';
import { primaryFailover } from './primary-failover.js';
import { redisLag } from './redis-lag.js';
import { redisRestart } from './redis-restart.js';
import { serviceDown } from './service-down.js';
import { stall } from './stall.js';

/**
 * Every fault kind, by the name scenarios give it: one line each. The fault types below (what a
 * scenario may write, and which target each pairs with) are derived from this table.
 */
export const FAULT_KINDS = {
  pause,
  crash,
  partition,
  stall,
  'clock-step': clockStep,
  'failover-mid-catch-up': failoverMidCatchUp,
  'connection-reset': connectionReset,
  'redis-lag': redisLag,
  'redis-restart': redisRestart,
  'lossy-failover': lossyFailover,
  'primary-failover': primaryFailover,
  'postgres-down': postgresDown,
  'postgres-restart': postgresRestart,
  'postgres-failover': postgresFailover,
  'etcd-leader-loss': etcdLeaderLoss,
  'service-down': serviceDown,
  'pool-exhausted': poolExhausted,
} as const;

type Kinds = typeof FAULT_KINDS;
type FaultOf<K> = K extends ReplicaFaultKind<infer F> ? F : K extends DeploymentFaultKind<'redis' | 'stores' | 'service', infer F> ? F : never;
type FaultsFor<T> = { [K in keyof Kinds]: Kinds[K] extends { readonly target: T } ? FaultOf<Kinds[K]> : never }[keyof Kinds];

/** A fault that hits one replica. */
export type ReplicaFault = FaultsFor<'replica'>;
/** A fault that hits the Redis deployment. */
export type RedisFault = FaultsFor<'redis'>;
/** A fault that hits every replica's connections to the stores. */
export type StoresFault = FaultsFor<'stores'>;
/** A fault that hits the service the app's job writes through. */
export type ServiceFaultOf = FaultsFor<'service'>;
export type AnyFault = ReplicaFault | RedisFault | StoresFault | ServiceFaultOf;

// Each fault is registered under its own kind (a scenario's `{ kind: 'pause' }` finds `pause`):
// checked here, at compile time.
type RegisteredUnderItsKind = { readonly [K in keyof Kinds]: FaultOf<Kinds[K]>['kind'] extends K ? true : never };
export const registeredUnderItsKind: RegisteredUnderItsKind = Object.fromEntries(Object.keys(FAULT_KINDS).map((k) => [k, true])) as RegisteredUnderItsKind;
