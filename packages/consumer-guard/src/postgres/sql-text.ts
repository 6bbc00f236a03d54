// The quoting rules live in @fenced/shared/internal: the coordinator's PostgreSQL lease store uses them too.
export { quoteIdent, quoteLiteral } from '@fenced/shared/internal';
