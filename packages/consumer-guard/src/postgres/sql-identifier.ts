// The identifier rule lives in @fenced/shared/internal: the coordinator's PostgreSQL lease store uses it too.
export { sqlIdentifierSchema } from '@fenced/shared/internal';
