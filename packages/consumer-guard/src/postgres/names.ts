import { quoteIdent } from './sql-text.js';

/** The quoted, schema-qualified names of the guard's database objects. */
export interface GuardObjectNames {
  readonly schema: string;
  readonly fences: string;
  readonly migrations: string;
  readonly checkFn: string;
  readonly advanceFn: string;
  readonly applied: string;
  readonly audit: string;
  readonly lowerFn: string;
  readonly takeoverFn: string;
  /** The fence check and the lease check in one call (migrations/000004.sql). */
  readonly checkedFn: string;
  /** The check of a batch of fires, a verdict per fire (migrations/000007.sql). */
  readonly checkBatchFn: string;
  /** The lease rows the lease check reads: @fenced/coordinator/postgres keeps them beside the fences. */
  readonly leases: string;
  /** `schema.table`, unquoted: the key that serializes migrators of one installation. */
  readonly installation: string;
}

/** Derives the object names from validated schema and table identifiers. */
export function guardObjectNames(schema: string, table: string): GuardObjectNames {
  const qualify = (name: string) => `${quoteIdent(schema)}.${quoteIdent(name)}`;
  return {
    schema: quoteIdent(schema),
    fences: qualify(table),
    migrations: qualify(`${table}_migrations`),
    checkFn: qualify(`${table}_check`),
    advanceFn: qualify(`${table}_advance`),
    applied: qualify(`${table}_applied`),
    audit: qualify(`${table}_audit`),
    lowerFn: qualify(`${table}_lower`),
    takeoverFn: qualify(`${table}_takeover`),
    checkedFn: qualify(`${table}_lease_check`),
    checkBatchFn: qualify(`${table}_check_batch`),
    leases: qualify(`${table}_leases`),
    installation: `${schema}.${table}`,
  };
}
