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
  EnvelopeSignatureError,
  DuplicateFireError,
  SchemaTooNewError,
  type FencedErrorByCode,
  type ValidationIssue,
} from './errors.js';
export { type Token, MIN_TOKEN, MAX_TOKEN, parseToken, isToken, formatToken } from './token.js';
export { MAX_RESOURCE_BYTES, parseResource } from './resource.js';
export { type Fence } from './fence.js';
export { fireId, parseFireId } from './fire-id.js';
export { type FencedEvent, type FencedLogger, type LeaseLossReason, emit } from './events.js';
export {
  ENVELOPE_VERSION,
  DEFAULT_MAX_PAYLOAD_BYTES,
  envelopeSchema,
  tokenSchema,
  tokenStringSchema,
  parseEnvelope,
  parseFireIdText,
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
export { canonicalEnvelope, canonicalJson, signEnvelope, verifyEnvelope, type SigningKey, type VerificationKeys } from './signing.js';
export { redisGuardOptionsSchema, type RedisGuardOptionsInput } from './config/redis-guard-config.js';
export { guardOptionsSchema, type GuardOptionsInput } from './config/guard-config.js';
export { withTimeout, TimeoutError } from './with-timeout.js';
