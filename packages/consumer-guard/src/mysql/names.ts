/** The quoted names of the MySQL store's objects, qualified by the database when one is given. */
export interface MysqlObjectNames {
  /** The database the objects live in, or null: the connection's current one. */
  readonly database: string | null;
  readonly fences: string;
  readonly applied: string;
  readonly audit: string;
  readonly migrations: string;
  readonly checkProc: string;
  readonly advanceProc: string;
  readonly lowerProc: string;
  /** The lease check of lease-checked writes (migrations/000003.sql). */
  readonly leaseCheckProc: string;
  /** The MySQL lease store's tables beside the fences (its own migration creates them). */
  readonly leaseTerms: string;
  readonly leases: string;
  /** The fence table's own name, unquoted (information_schema lookups). */
  readonly table: string;
  /** `database.table` (or `table`), unquoted: the key that serializes migrators of one installation. */
  readonly installation: string;
}

/** A backtick-quoted identifier; the names are validated identifiers, so no backtick can occur. */
const quote = (name: string) => '`' + name + '`';

/** Derives the object names from validated database and table identifiers. */
export function mysqlObjectNames(database: string | null, table: string): MysqlObjectNames {
  const qualify = (name: string) => (database === null ? quote(name) : `${quote(database)}.${quote(name)}`);
  return {
    database,
    fences: qualify(table),
    applied: qualify(`${table}_applied`),
    audit: qualify(`${table}_audit`),
    migrations: qualify(`${table}_migrations`),
    checkProc: qualify(`${table}_check`),
    advanceProc: qualify(`${table}_advance`),
    lowerProc: qualify(`${table}_lower`),
    leaseCheckProc: qualify(`${table}_lease_check`),
    leaseTerms: qualify(`${table}_lease_terms`),
    leases: qualify(`${table}_leases`),
    table,
    installation: database === null ? table : `${database}.${table}`,
  };
}
