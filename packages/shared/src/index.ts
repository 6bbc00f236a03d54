// @fenced/shared: the wire contract every fenced package depends on, so it changes least. Tokens,
// the task envelope (built and parsed here) and fire ids, signing, the fence interface, errors and
// events. Plumbing the packages share sits behind the unlisted `@fenced/shared/internal`.
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
  SchemaMissingError,
  InvalidMutationError,
  LeaseStoreUnavailableError,
  FireGivenUpError,
  type LeaseStoreFailure,
  type FencedErrorByCode,
  type ValidationIssue,
} from './errors.js';
export { type Token, type TokenInput, MIN_TOKEN, MAX_TOKEN, parseToken, isToken, formatToken } from './token.js';
export { MAX_RESOURCE_BYTES, parseResource } from './resource.js';
export { type Fence } from './fence.js';
export { fireId, parseFireId } from './fire-id.js';
export { dispatchKey } from './dispatch-key.js';
export { type FencedEvent, type FencedLogger, type LeaseLossReason } from './events.js';
export { ENVELOPE_VERSION, DEFAULT_MAX_PAYLOAD_BYTES, createEnvelope, parseEnvelope, parseFireIdText, parseIssuerText, type Envelope, type EnvelopeFields, type ReceivedEnvelope } from './envelope.js';
export { canonicalEnvelope, canonicalSignedFields, MIN_SECRET_BYTES, payloadDigest, signEnvelope, verifyEnvelope, verifySignedFields, type SignedFields, type SigningKey, type VerificationKeys } from './signing.js';
export { FIRE_HEADER, MAX_FIRE_HEADER_LENGTH, encodeFireHeader, parseFireHeader, verifyFire, type FireHeaderFields, type ReceivedFire } from './fire-header.js';
export { outcomeOfError, outcomeOfResult, type DispatchOutcome, type DispatchOutcomeStatus } from './dispatch-outcome.js';
