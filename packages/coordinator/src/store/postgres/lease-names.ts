import { createHash } from 'node:crypto';
import { fillPlaceholders, quoteIdent, quoteLiteral } from '@fenced/shared/internal';

/**
 * The quoted, schema-qualified names of the lease store's objects, derived from the guard's schema
 * and fence table (the leases live beside the fences, so an election can mint above them). Every
 * suffix is at most 15 bytes: a 48-byte table name still yields names within PostgreSQL's 63.
 */
export interface LeaseObjectNames {
  readonly schema: string;
  readonly leases: string;
  readonly acquireFn: string;
  readonly renewFn: string;
  readonly releaseFn: string;
  readonly raiseFn: string;
  readonly elections: string;
  readonly recordElectionFn: string;
  readonly fires: string;
  readonly recordFiresFn: string;
  readonly members: string;
  readonly beatFn: string;
  readonly migrations: string;
  /** The fence table's qualified name as a text literal (it may not exist). */
  readonly fencesName: string;
  /** The NOTIFY channel of releases (unquoted; a hash, so any schema and table fit in 63 bytes). */
  readonly channel: string;
  /** `schema.table`, unquoted: names the installation and serializes its migrators. */
  readonly installation: string;
}

export function leaseObjectNames(schema: string, table: string): LeaseObjectNames {
  const qualify = (suffix: string) => `${quoteIdent(schema)}.${quoteIdent(`${table}${suffix}`)}`;
  return {
    schema: quoteIdent(schema),
    leases: qualify('_leases'),
    acquireFn: qualify('_lease_acquire'),
    renewFn: qualify('_lease_renew'),
    releaseFn: qualify('_lease_release'),
    raiseFn: qualify('_lease_raise'),
    elections: qualify('_elections'),
    recordElectionFn: qualify('_lease_elected'),
    fires: qualify('_fires'),
    recordFiresFn: qualify('_record_fires'),
    members: qualify('_members'),
    beatFn: qualify('_member_beat'),
    migrations: qualify('_lease_schema'),
    fencesName: quoteLiteral(`${quoteIdent(schema)}.${quoteIdent(table)}`),
    channel: `fenced_leases_${createHash('sha256').update(`${schema}.${table}`).digest('hex').slice(0, 16)}`,
    installation: `${schema}.${table}_leases`,
  };
}

/** A migration with its placeholders replaced by the installation's names. */
export function renderLeaseMigration(text: string, names: LeaseObjectNames): string {
  return fillPlaceholders(text, {
    LEASES: names.leases,
    ACQUIRE_FN: names.acquireFn,
    RENEW_FN: names.renewFn,
    RELEASE_FN: names.releaseFn,
    RAISE_FN: names.raiseFn,
    ELECTIONS: names.elections,
    RECORD_ELECTION_FN: names.recordElectionFn,
    FIRES: names.fires,
    RECORD_FIRES_FN: names.recordFiresFn,
    MEMBERS: names.members,
    BEAT_FN: names.beatFn,
    FENCES_NAME: names.fencesName,
    CHANNEL: quoteLiteral(names.channel),
  });
}
