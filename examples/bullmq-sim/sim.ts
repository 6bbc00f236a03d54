/**
 * pnpm sim:bullmq: the split-brain simulation of the BullMQ service, with the same scenarios and
 * flags as `pnpm sim` (see --help); the ones this service runs on (a single Redis server) are the
 * default.
 */
import { runSimCli } from '@fenced/chaos';
import { bullmqServiceApp } from './app.js';

process.exitCode = await runSimCli(bullmqServiceApp, process.argv.slice(2));
