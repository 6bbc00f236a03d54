export { resolveServices, type ServiceUrls } from './services.js';
export { createPool, createTestSchema, kyselyOver, uniqueSchemaName, testDatabaseUrl, withPgClient } from './postgres.js';
