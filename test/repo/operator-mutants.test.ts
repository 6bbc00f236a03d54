// The SQL and Lua mutator must make the mutants it promises, one change each, and none in comments:
// a mutant in a comment is equivalent by construction and would only inflate the kill rate.
import { describe, expect, it } from 'vitest';
import { operatorMutants } from '../../scripts/mutate/operator-mutants.js';

const changes = (text: string, language: 'sql' | 'lua') => operatorMutants(text, language).map((m) => `${m.line}: ${m.change}`);

describe('operator mutants of SQL and Lua', () => {
  it('flip each comparison one way, swap the clocks, drop and weaken row locks, swap GREATEST and LEAST, drop a + 1', () => {
    const sql = ['SELECT 1 FROM leases WHERE expires_at <= clock_timestamp() AND token > $1', 'FOR UPDATE;', "UPDATE t SET counter = greatest(counter, $2) + 1 WHERE a <> b AND c < now() AND d >= 2;"].join('\n');
    expect(changes(sql, 'sql')).toEqual([
      '1: <= → <',
      '1: clock_timestamp() → now()',
      '1: > → >=',
      '2: FOR UPDATE → (removed)',
      '2: FOR UPDATE → FOR SHARE',
      '3: greatest( → LEAST(',
      '3: + 1 → (removed)',
      '3: <> → =',
      '3: < → <=',
      '3: now() → clock_timestamp()',
      '3: >= → >',
    ]);
    const lua = ['local n = tonumber(ARGV[1])', 'if redis.call("GET", KEYS[1]) == ARGV[2] then', '  return n + 1', 'elseif #a ~= #b then return #a < #b end'].join('\n');
    expect(changes(lua, 'lua')).toEqual(['2: == → ~=', '3: + 1 → (removed)', '4: ~= → ==', '4: < → <=']);
  });

  it("weaken a row lock to the file's own dialect: MariaDB has no FOR SHARE", () => {
    const sql = 'SELECT token INTO v FROM fences WHERE resource = p FOR UPDATE;';
    expect(operatorMutants(sql, 'sql', 'mysql').map((m) => m.text)).toEqual(['SELECT token INTO v FROM fences WHERE resource = p;', 'SELECT token INTO v FROM fences WHERE resource = p LOCK IN SHARE MODE;']);
    expect(operatorMutants(sql, 'sql', 'postgres').map((m) => m.text)[1]).toBe('SELECT token INTO v FROM fences WHERE resource = p FOR SHARE;');
  });

  it('take no block label or shift for a comparison', () => {
    const sql = ['<<fence>>', 'LOOP', '  EXIT fence WHEN a < b OR (c << 2) > d OR (e >> 1) = f;', 'END LOOP;'].join('\n');
    expect(changes(sql, 'sql')).toEqual(['3: < → <=', '3: > → >=']);
  });

  it('make exactly one change per mutant, leaving the rest of the file as it was', () => {
    const text = 'SELECT a FROM t WHERE a < 1 AND b < 2;';
    const mutants = operatorMutants(text, 'sql');
    expect(mutants.map((m) => m.text)).toEqual(['SELECT a FROM t WHERE a <= 1 AND b < 2;', 'SELECT a FROM t WHERE a < 1 AND b <= 2;']);
  });

  it('leave comments and quoted text alone: line comments, Lua block comments, SQL block comments', () => {
    const lua = ['--[[', '  Output: {1, token} when a < b', ']]', "local s = 'a < b' -- and c > d", 'return x'].join('\n');
    expect(changes(lua, 'lua')).toEqual([]);
    const sql = ['/* expires_at <= now() */', '-- token > fence FOR UPDATE', "SELECT '<=' AS op;"].join('\n');
    expect(changes(sql, 'sql')).toEqual([]);
  });
});
