/**
 * pnpm sim: the split-brain simulation of the ledger app. See `pnpm sim --help`.
 */
import { runSimCli } from '@fenced/chaos';
import { ledgerApp } from './app.js';

process.exitCode = await runSimCli(ledgerApp, process.argv.slice(2));
