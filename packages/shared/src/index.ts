export {
  FencedError,
  FencedErrorCode,
  isFencedError,
  StaleTokenError,
  InvalidTokenError,
  GuardUnavailableError,
  ConfigError,
  InvalidResourceError,
  InvalidEnvelopeError,
  FenceAheadError,
  NotLeaderError,
  type ValidationIssue,
} from './errors.js';
export { type Token, MIN_TOKEN, MAX_TOKEN, parseToken, isToken, formatToken } from './token.js';
export { MAX_RESOURCE_BYTES, parseResource } from './resource.js';
export { type Fence } from './fence.js';
export { type FencedEvent, type FencedLogger, type LeaseLossReason, emit } from './events.js';
export {
  ENVELOPE_VERSION,
  envelopeSchema,
  tokenSchema,
  tokenStringSchema,
  parseEnvelope,
  type Envelope,
} from './envelope.js';
export { parseOptions } from './config/parse-options.js';
export { sqlIdentifierSchema } from './config/sql-identifier.js';
export {
  resourceSchema,
  postgresGuardOptionsSchema,
  type PostgresGuardOptions,
  type PostgresGuardOptionsInput,
} from './config/postgres-guard-config.js';
export { toValidationIssues } from './validation.js';
export {
  coordinatorOptionsSchema,
  defaultDriftMs,
  groupNameSchema,
  type CoordinatorOptions,
  type CoordinatorOptionsInput,
} from './config/coordinator-config.js';
export {
  jobNameSchema,
  jobSchema,
  schedulerOptionsSchema,
  type SchedulerOptions,
  type SchedulerOptionsInput,
  type JobOptionsInput,
} from './config/scheduler-config.js';
