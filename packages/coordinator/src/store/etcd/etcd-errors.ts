import { LeaseStoreUnavailableError, type LeaseStoreFailure } from '@fenced/shared';
import { TimeoutError } from '@fenced/shared/internal';
import {
  EtcdAuthenticationFailedError,
  EtcdInvalidAuthTokenError,
  EtcdPermissionDeniedError,
  GRPCDeadlineExceededError,
  GRPCUnauthenticatedError,
  GRPCUnavailableError,
} from 'etcd3';

// etcd's own failures reach a client as gRPC statuses whose message is etcd's error string: those
// strings are etcd's wire contract (its Go client matches on them too, rpctypes), so they are what
// tells a cluster without a leader from an unreachable one.
const NO_QUORUM = ['etcdserver: no leader', 'etcdserver: request timed out', 'etcdserver: leader changed', 'etcdserver: too many requests'];
// A TLS handshake that fails surfaces as UNAVAILABLE; its details name the handshake.
const TLS = ['SSL', 'TLS', 'certificate', 'handshake'];

/** Why etcd did not answer, from the error etcd3 raised. */
export function etcdFailure(error: unknown): LeaseStoreFailure {
  if (error instanceof EtcdAuthenticationFailedError || error instanceof EtcdInvalidAuthTokenError || error instanceof EtcdPermissionDeniedError || error instanceof GRPCUnauthenticatedError) return 'auth';
  const message = error instanceof Error ? error.message : String(error);
  if (NO_QUORUM.some((m) => message.includes(m))) return 'no-quorum';
  if (error instanceof GRPCDeadlineExceededError || error instanceof TimeoutError) return 'timeout';
  if (error instanceof GRPCUnavailableError) return TLS.some((m) => message.includes(m)) ? 'tls' : 'unreachable';
  return 'failed';
}

/** The typed error for a failed etcd request (an error already typed passes through). */
export function etcdUnavailable(operation: string, error: unknown): LeaseStoreUnavailableError {
  if (error instanceof LeaseStoreUnavailableError) return error;
  const reason = etcdFailure(error);
  const detail = error instanceof Error ? error.message : String(error);
  return new LeaseStoreUnavailableError('etcd', reason, `${operation} failed (${reason}): ${detail}`, { cause: error });
}
