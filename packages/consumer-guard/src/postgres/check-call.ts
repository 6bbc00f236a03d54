import { quoteLiteral } from './sql-text.js';
import type { Statement } from './session.js';
import type { Token } from '@fenced/shared';

/**
 * The call of the check function (`<table>_check(resource, token, raises, fire_id)`) in the two forms
 * the guard sends it: with bind parameters inside a caller's transaction, and with its values inlined
 * as literals where it rides in BEGIN's round trip (the simple-query protocol takes no parameters).
 * The inlined form is built directly rather than by substituting `$n` in the other: it runs on every
 * guarded write, and every value in it is validated first (a bigint prints as digits only; the
 * resource and fire id are validated names, quoted by {@link quoteLiteral}).
 */
export interface CheckCall {
  statement(token: Token, resource: string, raises: boolean, fireId: string | null, issuer: string | null): Statement;
  inline(token: Token, resource: string, raises: boolean, fireId: string | null, issuer: string | null): string;
}

export function checkCall(checkFn: string): CheckCall {
  const text = `SELECT ${checkFn}($2::text, $1::bigint, $3::boolean, $4::text)`;
  return {
    statement: (token, resource, raises, fireId) => ({ text, values: [token, resource, raises, fireId] }),
    inline: (token, resource, raises, fireId) =>
      `SELECT ${checkFn}(${quoteLiteral(resource)}::text, ${token.toString()}::bigint, ${raises ? 'true' : 'false'}::boolean, ${fireId === null ? 'NULL' : quoteLiteral(fireId)}::text)`,
  };
}

/**
 * The lease-checked form (`<table>_lease_check`, migrations/000004.sql and 000005.sql): the same
 * check, then the write's lease, `leaseOf(resource)`, held by its token (and by `issuer`, when the
 * write names the node its token was issued to), in the same call. The issuer is validated text,
 * quoted by {@link quoteLiteral}, like the fire id.
 */
export function leaseCheckedCall(checkedFn: string, leaseOf: (resource: string) => string): CheckCall {
  const text = `SELECT ${checkedFn}($2::text, $1::bigint, $3::boolean, $4::text, $5::text, $6::text)`;
  const literal = (value: string | null) => (value === null ? 'NULL' : quoteLiteral(value));
  return {
    statement: (token, resource, raises, fireId, issuer) => ({ text, values: [token, resource, raises, fireId, leaseOf(resource), issuer] }),
    inline: (token, resource, raises, fireId, issuer) =>
      `SELECT ${checkedFn}(${quoteLiteral(resource)}::text, ${token.toString()}::bigint, ${raises ? 'true' : 'false'}::boolean, ${literal(fireId)}::text, ${quoteLiteral(leaseOf(resource))}::text, ${literal(issuer)}::text)`,
  };
}
