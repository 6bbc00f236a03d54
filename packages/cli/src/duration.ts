import { CliError, ExitCode } from './exit-codes.js';

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, min: 60_000, h: 3_600_000, d: 86_400_000 };

/** `500ms`, `30s`, `15m`, `12h`, `7d` → milliseconds; anything else is a usage error. */
export function parseDuration(flag: string, text: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|min|h|d)$/.exec(text.trim());
  if (match === null) throw new CliError(ExitCode.USAGE, `${flag}: expected a duration such as 30s, 15m, 12h or 7d, got ${JSON.stringify(text)}`);
  const ms = Number(match[1]) * UNITS[match[2]!]!;
  if (!Number.isSafeInteger(Math.round(ms))) throw new CliError(ExitCode.USAGE, `${flag}: ${text} is too long`);
  return Math.round(ms);
}
