import { leadershipIntervals } from '../checker/check-run.js';
import type { Effect, HistoryEvent } from '../history/history.js';
import type { RunResult } from '../sim/run-scenario.js';

/** What the report shows of one run. */
export type ReportRun = Pick<RunResult, 'scenario' | 'mode' | 'seed' | 'window' | 'check' | 'effects' | 'nodes'> & {
  readonly events: readonly HistoryEvent[];
  readonly summary?: string;
};

const esc = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
const TOKEN_COLORS = ['#4c78a8', '#72b7b2', '#54a24b', '#b279a2', '#9d755d', '#eeca3b', '#ff9da6', '#79706e'];

/** The anomalies the report marks on the timeline: effects that were stale or duplicated. */
function harmfulEffects(effects: readonly Effect[]): Map<Effect, 'stale' | 'duplicate'> {
  const marks = new Map<Effect, 'stale' | 'duplicate'>();
  const top = new Map<string, bigint>();
  const seen = new Set<string>();
  for (const e of [...effects].sort((a, b) => a.commitSeq - b.commitSeq)) {
    const highest = top.get(e.resource);
    if (highest !== undefined && e.token < highest) marks.set(e, 'stale');
    else if (seen.has(`${e.resource}\u0000${e.fireId}`)) marks.set(e, 'duplicate');
    if (highest === undefined || e.token > highest) top.set(e.resource, e.token);
    seen.add(`${e.resource}\u0000${e.fireId}`);
  }
  return marks;
}

function timeline(run: ReportRun): string {
  const width = 1100;
  const laneHeight = 34;
  const left = 46;
  const top = 22;
  const events = run.events;
  const start = run.window.start - 1000;
  const end = Math.max(run.window.end + 1000, ...events.map((e) => e.at));
  const x = (t: number) => left + ((t - start) / (end - start)) * (width - left - 10);
  const lane = (node: string) => top + run.nodes.indexOf(node) * laneHeight;
  const height = top + run.nodes.length * laneHeight + 26;
  const parts: string[] = [];

  // Faults: shaded bands across every lane, labelled.
  const openFaults = new Map<string, HistoryEvent & { kind: 'fault' }>();
  for (const e of events) {
    if (e.kind !== 'fault') continue;
    const key = `${e.fault}|${e.target ?? ''}`;
    if (e.phase === 'start') openFaults.set(key, e);
    else {
      const s = openFaults.get(key);
      openFaults.delete(key);
      if (s === undefined) continue;
      const y = s.target === undefined ? top - 4 : lane(s.target) - 4;
      const h = s.target === undefined ? run.nodes.length * laneHeight : laneHeight;
      parts.push(
        `<rect class="fault" x="${x(s.at)}" y="${y}" width="${Math.max(2, x(e.at) - x(s.at))}" height="${h}"><title>${esc(`${s.fault}${s.target ? ` on ${s.target}` : ''}${s.detail ? `: ${s.detail}` : ''}`)}</title></rect>`,
      );
      parts.push(`<text class="fault-label" x="${x(s.at) + 2}" y="${y + 9}">${esc(s.fault)}</text>`);
    }
  }
  // Overlaps: two replicas believed they led.
  for (const o of run.check.overlaps) {
    parts.push(
      `<rect class="overlap${o.harmless ? '' : ' harmful'}" x="${x(o.start)}" y="${top - 8}" width="${Math.max(2, x(o.end) - x(o.start))}" height="${run.nodes.length * laneHeight + 4}"><title>${esc(`${o.nodes.join(' and ')} both believed they led for ${Math.round(o.end - o.start)} ms${o.harmless ? ': harmless, the stale side was refused' : ': a stale write took effect'}`)}</title></rect>`,
    );
  }
  // Lanes, with leadership epochs labelled by token.
  for (const node of run.nodes) {
    const y = lane(node);
    parts.push(`<text class="lane-label" x="4" y="${y + 17}">${esc(node)}</text>`);
    parts.push(`<line class="lane" x1="${left}" x2="${width - 10}" y1="${y + 13}" y2="${y + 13}"/>`);
  }
  for (const epoch of leadershipIntervals(events, end)) {
    const y = lane(epoch.node);
    const color = TOKEN_COLORS[Number(epoch.token ?? 0) % TOKEN_COLORS.length];
    parts.push(
      `<rect class="epoch" data-node="${esc(epoch.node)}" x="${x(epoch.start)}" y="${y + 3}" width="${Math.max(2, x(epoch.end) - x(epoch.start))}" height="20" fill="${color}"><title>${esc(`${epoch.node} leads with token ${epoch.token ?? '?'}`)}</title></rect>`,
    );
    if (x(epoch.end) - x(epoch.start) > 26) parts.push(`<text class="token" x="${x(epoch.start) + 3}" y="${y + 17}">t${esc(epoch.token ?? '?')}</text>`);
  }
  // Paused and dead stretches.
  for (const node of run.nodes) {
    let pausedAt: number | undefined;
    for (const e of events) {
      if (e.kind !== 'process' || e.node !== node) continue;
      if (e.event === 'paused') pausedAt = e.at;
      if (e.event === 'resumed' && pausedAt !== undefined) {
        parts.push(`<rect class="paused" x="${x(pausedAt)}" y="${lane(node) + 24}" width="${Math.max(2, x(e.at) - x(pausedAt))}" height="5"><title>${esc(`${node} stopped (SIGSTOP)`)}</title></rect>`);
        pausedAt = undefined;
      }
    }
  }
  // Write outcomes as marks: refused stale (x), refused duplicate (triangle), failed (gray).
  for (const e of events) {
    if (e.kind !== 'write' || e.outcome === 'begin' || e.outcome === 'committed') continue;
    const cx = x(e.at);
    const cy = lane(e.node) + 13;
    const title = `<title>${esc(`${e.node}: ${e.outcome} ${e.fireId} (token ${e.token})${e.reason ? `: ${e.reason}` : ''}`)}</title>`;
    if (e.outcome === 'stale') parts.push(`<path class="mark refused" d="M${cx - 5},${cy - 5} L${cx + 5},${cy + 5} M${cx + 5},${cy - 5} L${cx - 5},${cy + 5}">${title}</path>`);
    else if (e.outcome === 'duplicate') parts.push(`<path class="mark duplicate" d="M${cx},${cy - 6} L${cx + 6},${cy + 5} L${cx - 6},${cy + 5} Z">${title}</path>`);
    else parts.push(`<circle class="mark failed" cx="${cx}" cy="${cy}" r="3">${title}</circle>`);
  }
  // Effects that took hold: small dots; stale or duplicate ones in red, large.
  const harmful = harmfulEffects(run.effects);
  for (const effect of run.effects) {
    if (!run.nodes.includes(effect.node)) continue;
    const kind = harmful.get(effect);
    const cx = x(effect.committedAt);
    const cy = lane(effect.node) + 13;
    parts.push(
      `<circle class="mark ${kind === undefined ? 'applied' : `harm ${kind}`}" cx="${cx}" cy="${cy}" r="${kind === undefined ? 2.2 : 5.5}"><title>${esc(`${effect.node} applied ${effect.fireId} with token ${effect.token}${kind ? ` — ${kind.toUpperCase()}` : ''}`)}</title></circle>`,
    );
  }
  // Time axis in seconds from the window start.
  for (let t = Math.ceil((start - run.window.start) / 1000) * 1000; run.window.start + t <= end; t += 1000) {
    const tx = x(run.window.start + t);
    parts.push(`<line class="tick" x1="${tx}" x2="${tx}" y1="${height - 22}" y2="${height - 17}"/>`);
    if ((t / 1000) % 5 === 0) parts.push(`<text class="tick-label" x="${tx - 4}" y="${height - 6}">${t / 1000}s</text>`);
  }
  return `<svg class="timeline" viewBox="0 0 ${width} ${height}" width="100%" role="img" aria-label="timeline of ${esc(run.scenario)} ${run.mode}">${parts.join('')}</svg>`;
}

const verdictOf = (run: ReportRun): { ok: boolean; text: string } =>
  run.mode === 'guarded'
    ? run.check.anomalies === 0
      ? { ok: true, text: 'no anomaly' }
      : { ok: false, text: `${run.check.anomalies} anomalies` }
    : run.check.anomalies > 0
      ? { ok: true, text: `damage shown: ${run.check.anomalies}` }
      : { ok: false, text: 'no damage: the scenario did not bite' };

export function resultTableRows(runs: readonly ReportRun[]): string[][] {
  return runs.map((r) => [
    r.scenario,
    r.mode,
    String(r.check.fires),
    String(r.check.effects),
    String(r.check.duplicates),
    String(r.check.missed),
    String(r.check.staleApplied),
    String(r.check.early),
    String(r.check.staleRefused),
    String(r.check.overlaps.length),
    String(r.check.maxFailoverGapMs),
    verdictOf(r).text,
  ]);
}

export const RESULT_COLUMNS = ['scenario', 'mode', 'fires', 'effects', 'duplicates', 'missed', 'stale applied', 'early', 'stale refused', 'overlaps', 'max gap ms', 'verdict'];

/** A self-contained HTML page: a timeline per run and the table of all runs. */
export function renderHtmlReport(runs: readonly ReportRun[], meta: { title: string; generatedAt: Date; command?: string }): string {
  const rows = resultTableRows(runs)
    .map((cells, i) => {
      const ok = verdictOf(runs[i]!).ok;
      return `<tr class="${ok ? 'ok' : 'bad'}">${cells.map((c) => `<td>${esc(c)}</td>`).join('')}</tr>`;
    })
    .join('');
  const sections = runs
    .map((run) => {
      const verdict = verdictOf(run);
      return `<section class="run" data-scenario="${esc(run.scenario)}" data-mode="${run.mode}">
  <h2>${esc(run.scenario)} <span class="mode ${run.mode}">${run.mode}</span> <span class="verdict ${verdict.ok ? 'ok' : 'bad'}">${esc(verdict.text)}</span></h2>
  ${run.summary ? `<p class="summary">${esc(run.summary)}</p>` : ''}
  ${timeline(run)}
  ${run.check.violations.length > 0 ? `<details><summary>${run.check.violations.length} violations</summary><ul>${run.check.violations.map((v) => `<li>${esc(v)}</li>`).join('')}</ul></details>` : ''}
</section>`;
    })
    .join('\n');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${esc(meta.title)}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#1d1d1f;max-width:1200px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:16px;margin:22px 0 6px}
.meta,.summary{color:#555;margin:2px 0 8px}
table{border-collapse:collapse;margin:10px 0 24px}th,td{border:1px solid #ddd;padding:3px 8px;text-align:right}
th:nth-child(-n+2),td:nth-child(-n+2),td:last-child{text-align:left}tr.bad td{background:#fde2e1}tr.ok td:last-child{color:#1a7f37}
.mode{font-size:12px;padding:1px 6px;border-radius:8px;background:#eee}.mode.guarded{background:#dbeafe}.mode.control{background:#fef3c7}
.verdict{font-size:12px;padding:1px 6px;border-radius:8px}.verdict.ok{background:#dcfce7;color:#166534}.verdict.bad{background:#fee2e2;color:#991b1b}
.timeline{border:1px solid #e5e5e5;background:#fafafa}.lane{stroke:#ccc}.lane-label{font:12px monospace}
.epoch{opacity:.85}.token{font:10px monospace;fill:#fff}.fault{fill:#f59e0b;opacity:.18}.fault-label{font:9px sans-serif;fill:#92400e}
.overlap{fill:#facc15;opacity:.35}.overlap.harmful{fill:#ef4444;opacity:.35}.paused{fill:#6b7280}
.mark.applied{fill:#15803d}.mark.harm{fill:#dc2626;stroke:#7f1d1d;stroke-width:1.5}.mark.refused{stroke:#dc2626;stroke-width:2.2;fill:none}
.mark.duplicate{fill:#f97316}.mark.failed{fill:#9ca3af}.tick{stroke:#999}.tick-label{font:10px sans-serif;fill:#666}
.legend span{margin-right:14px}.legend i{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:-1px}
</style></head><body>
<h1>${esc(meta.title)}</h1>
<p class="meta">${esc(meta.generatedAt.toISOString())}${meta.command ? ` — <code>${esc(meta.command)}</code>` : ''}</p>
<p class="legend"><span><i style="background:#4c78a8"></i>leading (token)</span><span><i style="background:#15803d;border-radius:5px"></i>write applied</span><span><i style="background:#dc2626;border-radius:5px"></i>stale or duplicate write applied</span><span><i style="border:2px solid #dc2626"></i>stale write refused</span><span><i style="background:#f97316"></i>duplicate refused</span><span><i style="background:#f59e0b;opacity:.4"></i>fault</span><span><i style="background:#facc15;opacity:.6"></i>two believed they led</span></p>
<table class="results"><thead><tr>${RESULT_COLUMNS.map((c) => `<th>${esc(c)}</th>`).join('')}</tr></thead><tbody>${rows}</tbody></table>
${sections}
</body></html>
`;
}
