/** The names the HTTP service, its callers and its simulation app share. */
export const LEASE = 'ledger-http';
export const JOB = 'post-entry';
export const RESOURCE = 'ledger-http';
/** The key id the callers sign with and the service verifies. */
export const KEY_ID = 'sim';
