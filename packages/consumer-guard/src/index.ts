// The root entry: the combined guard (a fence store as the authority, optional Redis fast path) and the
// handler wrapper. Single-backend guards live under subpaths (`@fenced/consumer-guard/postgres`, `/redis`).
// Nothing here imports a database driver: the caller's own clients are used.
export { createGuard, type Guard } from './create-guard.js';
export type { CombinedGuard } from './combined-guard.js';
export type { FenceGuard } from './fence-guard.js';
export type { FenceAdminStore, FenceStore, FenceStoreContext, FenceStoreFactory, FenceStoreKind, FenceWriteStore } from './fence-store.js';
export type { AppliedFire, AppliedOutcome, AuditEntry, FenceReport, GuardInspection, LowerFenceRequest } from './fence-records.js';
export type { TransactionalHandler } from './handler/wrap-transactional.js';
export { toProcessor } from './queues/bullmq.js';
export { toGraphileTask, type GraphileJobHelpersLike } from './queues/graphile-worker.js';
export { toPgBossHandler, type PgBossJobLike } from './queues/pg-boss.js';
export type { TransactionExecutor } from './write-context.js';
export {
  idempotencyKey,
  type GuardedHandler,
  type HandlerContext,
  type HandlerOptions,
  type HandlerOutcome,
  type WrappedHandler,
} from './handler/wrap-handler.js';
export {
  FencedError,
  FencedErrorCode,
  isFencedError,
  StaleTokenError,
  InvalidTokenError,
  InvalidEnvelopeError,
  EnvelopeSignatureError,
  DuplicateFireError,
  GuardUnavailableError,
  FenceAheadError,
  parseToken,
  signEnvelope,
  verifyEnvelope,
  type Envelope,
  type Fence,
  type Token,
  type TokenInput,
  type ReceivedEnvelope,
  type FencedEvent,
  type FencedLogger,
  type SigningKey,
  type VerificationKeys,
} from '@fenced/shared';
