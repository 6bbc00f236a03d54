import { fillPlaceholders } from '@fenced/shared/internal';
import { sqlFiles } from './statements/generated-sql.js';
import type { MysqlObjectNames } from './names.js';

/** The statements the store sends outside its procedures, with the installation's names filled in. */
export interface MysqlStatements {
  readonly readFenceShared: string;
  readonly claimFire: string;
  readonly recordOutcome: string;
  readonly readOutcome: string;
}

/** Strips a statement file's comment lines. */
const statement = (text: string) =>
  text
    .split('\n')
    .filter((line) => !line.startsWith('--') && line.trim() !== '')
    .join('\n');

export function mysqlStatements(names: MysqlObjectNames): MysqlStatements {
  const fill = (text: string) => statement(fillPlaceholders(text, { FENCES: names.fences, APPLIED: names.applied }));
  return {
    readFenceShared: fill(sqlFiles['read-fence-shared']),
    claimFire: fill(sqlFiles['claim-fire']),
    recordOutcome: fill(sqlFiles['record-outcome']),
    readOutcome: fill(sqlFiles['read-outcome']),
  };
}
