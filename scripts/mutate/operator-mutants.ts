/**
 * The mutants nobody picks by hand in the SQL and Lua files, which a JavaScript mutation tool does not
 * reach: every comparison flipped one way (`<` and `<=`, `>` and `>=`, Lua's `==` and `~=`), every
 * clock read swapped for the other kind (PostgreSQL's `now()`, the transaction's start, and
 * `clock_timestamp()`, the moment; MySQL's `NOW(6)` and `SYSDATE(6)`), every row lock dropped or
 * weakened (`FOR UPDATE`, `FOR SHARE`, `FOR NO KEY UPDATE`, `LOCK IN SHARE MODE`), `GREATEST` for
 * `LEAST` and back, and a `+ 1` that mints or advances dropped. Comments are left alone.
 */

export interface OperatorMutant {
  /** 1-based line of the change. */
  readonly line: number;
  /** What changed, as `before → after`. */
  readonly change: string;
  /** The whole file with the one change. */
  readonly text: string;
}

/** Which SQL a file is written in (Lua files have none). */
export type SqlDialect = 'postgres' | 'mysql';

interface Rule {
  readonly name: string;
  readonly pattern: RegExp;
  readonly replace: (match: string, dialect: SqlDialect) => string;
  readonly languages: ReadonlyArray<'sql' | 'lua'>;
}

const RULES: readonly Rule[] = [
  // Comparisons: one way each (the other direction of each pair is its own match).
  { name: 'comparison', pattern: /<=/g, replace: () => '<', languages: ['sql', 'lua'] },
  { name: 'comparison', pattern: />=/g, replace: () => '>', languages: ['sql', 'lua'] },
  // A doubled one is no comparison: a PL/pgSQL block label (`<<fence>>`), a shift.
  { name: 'comparison', pattern: /(?<![<>=~!-])<(?![=><])/g, replace: () => '<=', languages: ['sql', 'lua'] },
  { name: 'comparison', pattern: /(?<![<>=~!-])>(?![=>])/g, replace: () => '>=', languages: ['sql', 'lua'] },
  { name: 'comparison', pattern: /==/g, replace: () => '~=', languages: ['lua'] },
  { name: 'comparison', pattern: /~=/g, replace: () => '==', languages: ['lua'] },
  { name: 'comparison', pattern: /<>|!=/g, replace: () => '=', languages: ['sql'] },
  // Clocks: the transaction's start for the moment, and back.
  { name: 'clock', pattern: /\bclock_timestamp\(\)/gi, replace: () => 'now()', languages: ['sql'] },
  { name: 'clock', pattern: /\bnow\(\)/gi, replace: () => 'clock_timestamp()', languages: ['sql'] },
  { name: 'clock', pattern: /\bSYSDATE\(6\)/gi, replace: () => 'NOW(6)', languages: ['sql'] },
  { name: 'clock', pattern: /\bNOW\(6\)/gi, replace: () => 'SYSDATE(6)', languages: ['sql'] },
  // Row locks: dropped, or weakened.
  { name: 'lock', pattern: /\s+FOR (UPDATE|SHARE|NO KEY UPDATE)\b/gi, replace: () => '', languages: ['sql'] },
  // Weakened to the shared lock of the file's dialect: MariaDB has no `FOR SHARE` (a mutant that does
  // not parse would count as killed by every test).
  { name: 'lock', pattern: /\bFOR UPDATE\b/gi, replace: (_match, dialect) => (dialect === 'mysql' ? 'LOCK IN SHARE MODE' : 'FOR SHARE'), languages: ['sql'] },
  { name: 'lock', pattern: /\s+LOCK IN SHARE MODE\b/gi, replace: () => '', languages: ['sql'] },
  { name: 'extreme', pattern: /\bGREATEST\(/gi, replace: () => 'LEAST(', languages: ['sql'] },
  { name: 'extreme', pattern: /\bLEAST\(/gi, replace: () => 'GREATEST(', languages: ['sql'] },
  { name: 'step', pattern: /\s*\+\s*1\b(?!\d)/g, replace: () => '', languages: ['sql', 'lua'] },
];

/**
 * `text` with every comment blanked out (each character a space, newlines kept), so that offsets
 * still match: line comments (`--`, SQL and Lua both), Lua's block comments (`--[[ … ]]`) and SQL's
 * (`/* … *\/`), and the inside of quoted strings (data, not code).
 */
function codeOnly(text: string, language: 'sql' | 'lua'): string {
  const out = text.split('');
  let i = 0;
  const blank = (from: number, to: number) => {
    for (let k = from; k < to && k < out.length; k++) if (out[k] !== '\n') out[k] = ' ';
  };
  // Each span that is not code: where it opens, where it closes, and whether its delimiters stay.
  const spans = [
    { open: "'", close: "'", data: true },
    { open: '"', close: '"', data: true },
    ...(language === 'lua' ? [{ open: '--[[', close: ']]', data: false }] : [{ open: '/*', close: '*/', data: false }]),
    { open: '--', close: '\n', data: false },
  ];
  while (i < text.length) {
    const span = spans.find((s) => text.startsWith(s.open, i));
    if (span === undefined) {
      i++;
      continue;
    }
    const close = text.indexOf(span.close, i + span.open.length);
    // A line comment ends before its newline; the others after their closing delimiter.
    const end = close < 0 ? text.length : span.close === '\n' ? close : close + span.close.length;
    // A quoted string is data: blanked inside its quotes, so an operator in it is no mutant.
    if (span.data) blank(i + 1, end - 1);
    else blank(i, end);
    i = end;
  }
  return out.join('');
}

/** Every one-change mutant of `text`, a file in `language` (SQL of `dialect`), in the order of the file. */
export function operatorMutants(text: string, language: 'sql' | 'lua', dialect: SqlDialect = 'postgres'): OperatorMutant[] {
  const code = codeOnly(text, language);
  const mutants: Array<OperatorMutant & { readonly at: number }> = [];
  const seen = new Set<string>();
  for (const rule of RULES) {
    if (!rule.languages.includes(language)) continue;
    for (const match of code.matchAll(rule.pattern)) {
      const at = match.index!;
      const replacement = rule.replace(match[0], dialect);
      const mutated = text.slice(0, at) + replacement + text.slice(at + match[0].length);
      if (seen.has(mutated)) continue;
      seen.add(mutated);
      // A match may start with the whitespace it removes: its line is that of its first word.
      const word = at + match[0].length - match[0].trimStart().length;
      mutants.push({ at: word, line: text.slice(0, word).split('\n').length, change: `${match[0].trim() || match[0]} → ${replacement.trim() || '(removed)'}`, text: mutated });
    }
  }
  // In the order of the file; two rules at one place in the order of the rules.
  return mutants.sort((a, b) => a.at - b.at).map(({ at: _at, ...mutant }) => mutant);
}
