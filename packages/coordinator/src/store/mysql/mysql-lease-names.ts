import { fillPlaceholders } from '@fenced/shared/internal';

/**
 * The quoted names of the MySQL lease store's objects, derived from the guard's fence table (the
 * leases live beside the fences, so an election can mint above them), qualified by the database when
 * one is given. Every suffix is at most 16 bytes: a 48-byte table name yields names within MySQL's 64.
 */
export interface MysqlLeaseObjectNames {
  /** The database the objects live in, or null: the connection's current one. */
  readonly database: string | null;
  readonly leases: string;
  /** The term rows: what a lease-checked write holds in share mode (see migrations/000001.sql). */
  readonly terms: string;
  readonly elections: string;
  readonly fires: string;
  readonly members: string;
  readonly migrations: string;
  readonly acquireProc: string;
  readonly renewProc: string;
  readonly releaseProc: string;
  readonly recordElectionProc: string;
  readonly recordFiresProc: string;
  readonly beatProc: string;
  /** The guard's fence table (it may not exist). */
  readonly fences: string;
  /** `database.table_leases` (or `table_leases`), unquoted: names the installation and keys its migrators' lock. */
  readonly installation: string;
}

/** A backtick-quoted identifier; the names are validated identifiers, so no backtick can occur. */
const quote = (name: string) => '`' + name + '`';

export function mysqlLeaseObjectNames(database: string | null, table: string): MysqlLeaseObjectNames {
  const qualify = (name: string) => (database === null ? quote(name) : `${quote(database)}.${quote(name)}`);
  return {
    database,
    leases: qualify(`${table}_leases`),
    terms: qualify(`${table}_lease_terms`),
    elections: qualify(`${table}_elections`),
    fires: qualify(`${table}_fires`),
    members: qualify(`${table}_members`),
    migrations: qualify(`${table}_lease_schema`),
    acquireProc: qualify(`${table}_lease_acquire`),
    renewProc: qualify(`${table}_lease_renew`),
    releaseProc: qualify(`${table}_lease_release`),
    recordElectionProc: qualify(`${table}_lease_elected`),
    recordFiresProc: qualify(`${table}_record_fires`),
    beatProc: qualify(`${table}_member_beat`),
    fences: qualify(table),
    installation: database === null ? `${table}_leases` : `${database}.${table}_leases`,
  };
}

/** A migration with its placeholders replaced by the installation's names. */
export function renderMysqlLeaseMigration(text: string, names: MysqlLeaseObjectNames): string {
  return fillPlaceholders(text, {
    LEASES: names.leases,
    TERMS: names.terms,
    ELECTIONS: names.elections,
    FIRES: names.fires,
    MEMBERS: names.members,
    ACQUIRE_PROC: names.acquireProc,
    RENEW_PROC: names.renewProc,
    RELEASE_PROC: names.releaseProc,
    RECORD_ELECTION_PROC: names.recordElectionProc,
    RECORD_FIRES_PROC: names.recordFiresProc,
    BEAT_PROC: names.beatProc,
    FENCES: names.fences,
  });
}
