// The root entry re-exports the shared vocabulary; backends live under subpaths
// (`@fenced/consumer-guard/postgres`) so that a Redis-only user never loads PostgreSQL code.
export {
  FencedError,
  FencedErrorCode,
  isFencedError,
  StaleTokenError,
  InvalidTokenError,
  GuardUnavailableError,
  FenceAheadError,
  parseToken,
  type Fence,
  type Token,
  type FencedEvent,
  type FencedLogger,
} from '@fenced/shared';
