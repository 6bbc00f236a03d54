/**
 * pnpm sim:http: the split-brain simulation of a scheduler whose job calls an HTTP service of the
 * team's own, with the same flags as `pnpm sim` (see --help); the scenarios this service runs are the
 * default.
 */
import { runSimCli } from '@fenced/chaos';
import { httpServiceApp } from './app.js';

process.exitCode = await runSimCli(httpServiceApp, process.argv.slice(2));
