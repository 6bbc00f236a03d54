import { runScenario, scenarios } from '@fenced/chaos';
import { ledgerApp } from './app.js';
const name = (process.argv[2] ?? 'pause') as keyof typeof scenarios;
for (const mode of ['guarded', 'control'] as const) {
  const r = await runScenario(ledgerApp, scenarios[name], mode, {
    databaseUrl: 'postgres://postgres@127.0.0.1:5432/test', replicas: 3, durationMs: Number(process.argv[3] ?? 8000), seed: Number(process.argv[4] ?? 1), ttlMs: 1000, renewMs: 250, everyMs: 250,
    onProgress: (s) => process.stderr.write(`${s.scenario} ${s.mode} ${s.phase} ${(s.elapsedMs/1000).toFixed(0)}s leader=${s.leader}\n`),
  });
  const { history, effects, diagnostics, ...rest } = r;
  console.log(mode, JSON.stringify({ ...rest.check, overlaps: rest.check.overlaps.length }, null, 0));
  if (r.check.effects === 0) console.log(diagnostics);
  const toks = [...r.effects].sort((a, b) => a.commitSeq - b.commitSeq).map((e) => `${e.token}${e.node}`);
  const missedIds = r.check.violations.filter((v) => v.startsWith('fire never')).map((v) => v.split(': ')[1]);
  for (const id of missedIds) console.log(mode, 'missed', id, JSON.stringify(r.history.events.filter((e: any) => e.fireId === id)));
  console.log(mode, 'window', new Date(r.window.start).toISOString(), new Date(r.window.end).toISOString(), 'last events', JSON.stringify(r.history.events.filter((e: any) => e.at > r.window.end - 1500 && e.kind !== 'dispatch').slice(0, 30).map((e: any) => [new Date(e.at).toISOString().slice(17, 23), e.kind, e.node ?? e.fault, e.outcome ?? e.event ?? e.phase ?? e.leader, e.fireId?.slice(-10)])));
  console.log(mode, 'tokens', toks.join(' '));
  console.log(mode, 'faults', r.history.events.filter((e) => e.kind === 'fault' || e.kind === 'belief').map((e) => e.kind === 'fault' ? `[${e.fault} ${e.phase}]` : `${(e as any).node}:${(e as any).leader ? 'L' + (e as any).token : 'x'}`).join(' '));
}
