// `@fenced/consumer-guard/http`: fences for HTTP services of the team's own. The caller attaches a
// fire to its request (`fireHeaders`, `sendFire`); the service checks its token in the write's own
// transaction on its own database (`guard.wrapRoute`, then an adapter for node:http, Express or
// Fastify). The header's format is in docs/http-fire-header.md. Nothing here imports a framework.
export { DEFAULT_SEND_TIMEOUT_MS, FireCallTimeoutError, fireHeaders, sendFire, type FireResponse, type SendFireOptions } from './caller.js';
export { toExpressHandler, toFastifyHandler, toNodeListener, type ExpressRequestLike, type FastifyReplyLike, type FastifyRequestLike, type NodeAdapterOptions } from './adapters.js';
export {
  OUTCOME_HEADER,
  type FencedEndpoint,
  type FencedReply,
  type FencedRouteHandler,
  type FireContext,
  type FireOutcome,
  type FireRequest,
  type RouteOptions,
  type RouteReply,
} from './fenced-endpoint.js';
export type { ErrorBody } from './error-replies.js';
export { FIRE_HEADER, encodeFireHeader, parseFireHeader, verifyFire, type ReceivedFire } from '@fenced/shared';
