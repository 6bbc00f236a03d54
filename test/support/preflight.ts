/**
 * `pnpm test` runs this first: it finds the services the way the test run will and checks each one
 * for real, so that a wrong DATABASE_URL or REDIS_URL stops the run at once with one line saying
 * what to set (exit 2), instead of every test file failing in its teardown. Containers it had to
 * start are stopped again; the test run starts its own.
 */
import { resolveServices, ServiceSetupError } from './services.js';

try {
  const services = await resolveServices();
  await services.stop();
} catch (err) {
  process.stderr.write(`pnpm test: ${err instanceof ServiceSetupError ? err.message : String(err)}\n`);
  process.exit(2);
}
