/**
 * Quoting for the few places where values travel inside SQL text (the simple-query protocol that
 * lets the check ride in the same round trip as BEGIN). Everything else uses bind parameters.
 */

/** Quotes an identifier that already passed `sqlIdentifierSchema`. */
export function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/**
 * A string literal that means the same text whatever `standard_conforming_strings` is: the `E''`
 * form with backslashes and quotes doubled (node-postgres' `escapeLiteral` uses the same rule).
 * NUL cannot appear: resource names are validated first.
 */
export function quoteLiteral(value: string): string {
  if (value.includes('\u0000')) throw new TypeError('NUL in SQL literal');
  const body = value.replaceAll("'", "''");
  return value.includes('\\') ? `E'${body.replaceAll('\\', '\\\\')}'` : `'${body}'`;
}
