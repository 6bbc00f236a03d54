import type { FencedLogger, GuardUnavailableError, Token } from '@fenced/shared';
import { emit } from '@fenced/shared/internal';
import type { ParsedLowerFenceRequest } from '../fence-records.js';

/** What a SQL store's admin and inspection operations need from the store that owns them. */
export interface SqlAdminContext<Session, Names> {
  readonly session: Session;
  readonly names: Names;
  readonly defaultResource: string;
  readonly logger: FencedLogger | undefined;
  /** Maps a database failure to the guard's typed error. */
  readonly fail: (resource: string, phase: string, cause: unknown) => GuardUnavailableError;
  /** Called after a fence was lowered, with the new token. */
  readonly onLowered: (resource: string, token: Token) => void;
}

/** After a fence was lowered on purpose: the store's callback, then the audited event. */
export function reportLowered<S, N>(ctx: SqlAdminContext<S, N>, request: ParsedLowerFenceRequest, previous: Token | null): Token | null {
  ctx.onLowered(request.resource, request.token);
  emit(ctx.logger, { type: 'fence.lowered', resource: request.resource, from: previous, to: request.token, actor: request.actor, reason: request.reason });
  return previous;
}
