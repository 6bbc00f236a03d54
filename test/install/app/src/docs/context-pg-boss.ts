// The reader's pg-boss instance, for the blocks that use it: apart from context.ts because pg-boss
// 12.38's declaration files do not compile with skipLibCheck false (see the install test).
import type { PgBoss } from 'pg-boss';

declare global {
  const boss: PgBoss;
}
