import { ANOMALY_COLUMNS } from '../checker/invariants.js';
import { PROTECTIONS, type Exercise, type Protection } from '../checker/protections.js';
import { verdictOf, type Verdict } from './verdict.js';
import { INCONCLUSIVE_STARVATION_MS } from '../checker/starvation.js';
import { leadershipIntervals } from '../checker/check-run.js';
import { faultSpans, type HistoryEvent } from '../history.js';
import type { RunResult } from '../sim/run-scenario.js';

/** What the report shows of one run. */
export type ReportRun = Pick<RunResult, 'scenario' | 'mode' | 'seed' | 'window' | 'check' | 'effects' | 'nodes'> & {
  readonly events: readonly HistoryEvent[];
  readonly summary?: string;
  /** The protections its scenario must show at work in a guarded run (see `Scenario.exercises`). */
  readonly exercises?: readonly Exercise[];
};

const esc = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
/** Epoch colours, by token: dark enough for a light label with a dark outline to stay readable. */
const TOKEN_COLORS = ['#2563eb', '#0d9488', '#7c3aed', '#0369a1', '#4d7c0f', '#be185d', '#6d28d9', '#475569'];

/**
 * Everything the timeline draws, by legend key: the legend is made from this list, and every element
 * drawn carries its key (`data-legend`), so a mark without a legend entry is a test failure.
 */
const LEGEND: ReadonlyArray<{ key: string; label: string; swatch: string }> = [
  {
    key: 'epoch',
    label: 'believes it leads (colour and label: its token)',
    swatch: TOKEN_COLORS.slice(0, 3).map((c, i) => `<rect x="${i * 5}" y="2" width="5" height="10" fill="${c}"/>`).join(''),
  },
  { key: 'paused', label: 'process stopped (SIGSTOP)', swatch: '<rect class="paused" x="0" y="5" width="14" height="5"/>' },
  { key: 'fault', label: 'fault injected', swatch: '<rect class="fault" x="0" y="0" width="14" height="14"/>' },
  { key: 'overlap', label: 'two believed they led, harmless', swatch: '<rect class="overlap" x="0" y="0" width="14" height="14"/>' },
  { key: 'overlap-harmful', label: 'two believed they led, and a stale write took effect', swatch: '<rect class="overlap harmful" x="0" y="0" width="14" height="14"/>' },
  { key: 'applied', label: 'write applied', swatch: '<circle class="mark applied" cx="7" cy="7" r="3"/>' },
  { key: 'harm', label: 'stale, duplicate or early write applied (a violation)', swatch: '<circle class="mark harm" cx="7" cy="7" r="5.5"/>' },
  { key: 'refused', label: 'stale write refused', swatch: '<path class="mark refused" d="M2,2 L12,12 M12,2 L2,12"/>' },
  { key: 'duplicate', label: 'duplicate fire refused', swatch: '<path class="mark duplicate" d="M7,1 L13,12 L1,12 Z"/>' },
  { key: 'failed', label: 'write failed (guard unreachable, error)', swatch: '<circle class="mark failed" cx="7" cy="7" r="3"/>' },
  { key: 'failpoint', label: 'a failpoint hit: stopped or stalled there (where the fault was aimed)', swatch: '<path class="mark failpoint" d="M7,1 L13,7 L7,13 L1,7 Z"/>' },
];

function legend(): string {
  return `<p class="legend">${LEGEND.map((l) => `<span class="legend-entry" data-legend-entry="${l.key}"><svg width="14" height="14" viewBox="0 0 14 14">${l.swatch}</svg>${esc(l.label)}</span>`).join('')}</p>`;
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
  for (const { start: s, end } of faultSpans(events)) {
    if (end === undefined) continue;
    const y = s.target === undefined ? top - 4 : lane(s.target) - 4;
    const h = s.target === undefined ? run.nodes.length * laneHeight : laneHeight;
    parts.push(
      `<rect class="fault" data-legend="fault" x="${x(s.at)}" y="${y}" width="${Math.max(2, x(end) - x(s.at))}" height="${h}"><title>${esc(`${s.fault}${s.target ? ` on ${s.target}` : ''}${s.detail ? `: ${s.detail}` : ''}`)}</title></rect>`,
    );
    parts.push(`<text class="fault-label" x="${x(s.at) + 2}" y="${y + 9}">${esc(s.fault)}</text>`);
  }
  // Overlaps: two replicas believed they led.
  for (const o of run.check.overlaps) {
    parts.push(
      `<rect class="overlap${o.harmless ? '' : ' harmful'}" data-legend="${o.harmless ? 'overlap' : 'overlap-harmful'}" x="${x(o.start)}" y="${top - 8}" width="${Math.max(2, x(o.end) - x(o.start))}" height="${run.nodes.length * laneHeight + 4}"><title>${esc(`${o.nodes.join(' and ')} both believed they led for ${Math.round(o.end - o.start)} ms${o.harmless ? ': harmless, the stale side was refused' : ': a stale write took effect'}`)}</title></rect>`,
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
      `<rect class="epoch" data-legend="epoch" data-node="${esc(epoch.node)}" x="${x(epoch.start)}" y="${y + 3}" width="${Math.max(2, x(epoch.end) - x(epoch.start))}" height="20" fill="${color}"><title>${esc(`${epoch.node} leads with token ${epoch.token ?? '?'}`)}</title></rect>`,
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
        parts.push(`<rect class="paused" data-legend="paused" x="${x(pausedAt)}" y="${lane(node) + 24}" width="${Math.max(2, x(e.at) - x(pausedAt))}" height="5"><title>${esc(`${node} stopped (SIGSTOP)`)}</title></rect>`);
        pausedAt = undefined;
      }
    }
  }
  // Failpoint hits: a diamond on the lane's line, named in its title.
  for (const e of events) {
    if (e.kind !== 'failpoint') continue;
    const cx = x(e.at);
    const cy = lane(e.node) + 13;
    parts.push(`<path class="mark failpoint" data-legend="failpoint" d="M${cx},${cy - 6} L${cx + 6},${cy} L${cx},${cy + 6} L${cx - 6},${cy} Z"><title>${esc(`${e.node} ${e.action === 'stall' ? 'stalled' : 'stopped'} at ${e.name}`)}</title></path>`);
  }
  // Write outcomes as marks: refused stale (✕), refused duplicate (triangle), failed (grey dot).
  for (const e of events) {
    if (e.kind !== 'write' || e.outcome === 'begin' || e.outcome === 'committed') continue;
    const cx = x(e.at);
    const cy = lane(e.node) + 13;
    const title = `<title>${esc(`${e.node}: ${e.outcome} ${e.fireId} (token ${e.token})${e.reason ? `: ${e.reason}` : ''}`)}</title>`;
    if (e.outcome === 'stale') parts.push(`<path class="mark refused" data-legend="refused" d="M${cx - 5},${cy - 5} L${cx + 5},${cy + 5} M${cx + 5},${cy - 5} L${cx - 5},${cy + 5}">${title}</path>`);
    else if (e.outcome === 'duplicate') parts.push(`<path class="mark duplicate" data-legend="duplicate" d="M${cx},${cy - 6} L${cx + 6},${cy + 5} L${cx - 6},${cy + 5} Z">${title}</path>`);
    else parts.push(`<circle class="mark failed" data-legend="failed" cx="${cx}" cy="${cy}" r="3">${title}</circle>`);
  }
  // Effects that took hold: small dots; stale or duplicate ones in red, large.
  // The checker's marks, not a judgement of the report's own: stale first when an effect is both.
  const harmful = new Map<number, 'stale' | 'duplicate' | 'early'>();
  for (const mark of run.check.marks) if (!harmful.has(mark.commitSeq) || mark.kind === 'stale') harmful.set(mark.commitSeq, mark.kind);
  for (const effect of run.effects) {
    if (!run.nodes.includes(effect.node)) continue;
    const kind = harmful.get(effect.commitSeq);
    const cx = x(effect.committedAt);
    const cy = lane(effect.node) + 13;
    parts.push(
      `<circle class="mark ${kind === undefined ? 'applied' : `harm harm-${kind}`}" data-legend="${kind === undefined ? 'applied' : 'harm'}" cx="${cx}" cy="${cy}" r="${kind === undefined ? 2.2 : 5.5}"><title>${esc(`${effect.node} applied ${effect.fireId} with token ${effect.token}${kind ? ` — ${kind.toUpperCase()}` : ''}`)}</title></circle>`,
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


/**
 * The results table, one column per entry: its heading, what it means, and its cell. The anomaly
 * columns come from the invariants' registry and the protection columns from the protections', so a
 * new invariant or protection shows here without a line of its own.
 */
const TABLE: ReadonlyArray<{ readonly column: string; readonly meaning: string; readonly cell: (run: ReportRun) => string }> = [
  { column: 'scenario', meaning: 'the fault injected (see --help for each)', cell: (r) => r.scenario },
  { column: 'mode', meaning: 'guarded: the app with every protection on; control: the same app and faults with them off', cell: (r) => r.mode },
  { column: 'fires', meaning: 'fires due inside the checked window (from the first dispatch to the end of the faults); each must take effect exactly once', cell: (r) => String(r.check.fires) },
  {
    column: 'effects',
    meaning: 'rows that took effect during the whole run, which also covers the start-up before the window and the settling after it, so it is larger than fires',
    cell: (r) => String(r.check.effects),
  },
  ...ANOMALY_COLUMNS.map(({ column, meaning }) => ({ column, meaning, cell: (r: ReportRun) => String(r.check.columns[column]) })),
  ...(Object.entries(PROTECTIONS) as Array<[Protection, (typeof PROTECTIONS)[Protection]]>)
    .filter(([, p]) => p.column !== undefined)
    .map(([name, p]) => ({ column: p.column!, meaning: p.meaning, cell: (r: ReportRun) => String(r.check.protections[name]) })),
  { column: 'overlaps', meaning: 'stretches in which two or more replicas believed they led; expected under pauses, harmless when no stale write took effect', cell: (r) => String(r.check.overlaps.length) },
  { column: 'max gap ms', meaning: 'the longest stretch inside the window with no dispatch by anyone: failover time plus up to one interval', cell: (r) => String(r.check.maxFailoverGapMs) },
  {
    column: 'verdict',
    meaning: `guarded: no anomaly (every column from ${ANOMALY_COLUMNS[0].column} to ${ANOMALY_COLUMNS.at(-1)!.column} is 0), or toothless when a protection the scenario exercises never came into play; control: the damage the faults did without protection; either: inconclusive when the machine starved a replica or the supervisor of CPU for ${INCONCLUSIVE_STARVATION_MS} ms or more (measured, outside the faults aimed at it) and a timing check still failed after crediting it: the timing is not judged, safety is; or when a fault said it missed its precondition and the run shows no protection at work (guarded) or no damage (control); either: harness failed when the toolkit itself failed (a deployment that did not heal, a server that did not start: the error and its phase are named, the run healed, checked and kept, what it started stopped, the other runs go on)`,
    cell: (r) => verdictOf(r).text,
  },
];

export function resultTableRows(runs: readonly ReportRun[]): string[][] {
  return runs.map((r) => TABLE.map((c) => c.cell(r)));
}

export const RESULT_COLUMNS: readonly string[] = TABLE.map((c) => c.column);

/** What each column of the table means: printed by `--help`, under the report's table, and in the docs. */
export const COLUMN_DEFINITIONS: ReadonlyArray<readonly [column: string, meaning: string]> = TABLE.map((c) => [c.column, c.meaning] as const);

/** A self-contained HTML page: a timeline per run and the table of all runs. */
export function renderHtmlReport(runs: readonly ReportRun[], meta: { title: string; generatedAt: Date; command?: string }): string {
  const rows = resultTableRows(runs)
    .map((cells, i) => {
      return `<tr class="${verdictClass(verdictOf(runs[i]!))}">${cells.map((c) => `<td>${esc(c)}</td>`).join('')}</tr>`;
    })
    .join('');
  const sections = runs
    .map((run) => {
      const verdict = verdictOf(run);
      return `<section class="run" data-scenario="${esc(run.scenario)}" data-mode="${run.mode}">
  <h2>${esc(run.scenario)} <span class="mode ${run.mode}">${run.mode}</span> <span class="verdict ${verdictClass(verdict)}">${esc(verdict.text)}</span></h2>
  ${run.summary ? `<p class="summary">${esc(run.summary)}</p>` : ''}
  ${timeline(run)}
  ${run.check.inconclusive !== null ? `<details class="violations inconclusive" open><summary>not judged: ${esc(run.check.inconclusive.reason)}</summary><ul>${run.check.inconclusive.violations.map((v) => `<li>${esc(v)}</li>`).join('')}</ul></details>` : ''}
  ${run.check.violations.length > 0 ? `<details class="violations" open><summary>${run.check.violations.length} violations</summary><ul>${run.check.violations.map((v) => `<li>${esc(v)}</li>`).join('')}</ul></details>` : ''}
</section>`;
    })
    .join('\n');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${esc(meta.title)}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#1d1d1f;max-width:1352px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:16px;margin:22px 0 6px}
.meta,.summary{color:#555;margin:2px 0 8px}
table{border-collapse:collapse;margin:10px 0 24px;font-size:12px}th,td{border:1px solid #ddd;padding:2px 4px;text-align:right}th{vertical-align:bottom;max-width:5.5em;font-weight:600;font-size:10px}td:last-child{max-width:16em}
.results-box{overflow-x:auto}
th:nth-child(-n+2),td:nth-child(-n+2),td:last-child{text-align:left}tr.bad td{background:#fde2e1}tr.inconclusive td{background:#fef9c3}tr.ok td:last-child{color:#1a7f37}
.mode{font-size:12px;padding:1px 6px;border-radius:8px;background:#eee}.mode.guarded{background:#dbeafe}.mode.control{background:#fef3c7}
.verdict{font-size:12px;padding:1px 6px;border-radius:8px}.verdict.ok{background:#dcfce7;color:#166534}.verdict.bad{background:#fee2e2;color:#991b1b}.verdict.inconclusive{background:#fef9c3;color:#854d0e}
.timeline{border:1px solid #e5e5e5;background:#fafafa}.lane{stroke:#ccc}.lane-label{font:12px monospace}
.epoch{opacity:.9}.token{font:bold 10px monospace;fill:#fff;stroke:#111;stroke-width:2.5px;paint-order:stroke}
.fault{fill:#6366f1;opacity:.16}.fault-label{font:9px sans-serif;fill:#3730a3}
.overlap{fill:#facc15;opacity:.45}.overlap.harmful{fill:#ef4444;opacity:.45}.paused{fill:#6b7280}
.mark.applied{fill:#15803d}.mark.harm{fill:#dc2626;stroke:#7f1d1d;stroke-width:1.5}.mark.refused{stroke:#dc2626;stroke-width:2.2;fill:none}
.mark.duplicate{fill:#f97316}.mark.failed{fill:#9ca3af}.mark.failpoint{fill:#7c3aed;stroke:#fff;stroke-width:1}.tick{stroke:#999}.tick-label{font:10px sans-serif;fill:#666}
.legend{display:flex;flex-wrap:wrap;gap:4px 16px}.legend svg{margin-right:4px;vertical-align:-2px;overflow:visible}
details.violations li{color:#991b1b}
dl.columns{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;color:#444;font-size:12px;margin:-14px 0 20px}dl.columns dt{font-weight:600}dl.columns dd{margin:0}
</style></head><body>
<h1>${esc(meta.title)}</h1>
<p class="meta">${esc(meta.generatedAt.toISOString())}${meta.command ? ` — <code>${esc(meta.command)}</code>` : ''}</p>
${legend()}
<div class="results-box"><table class="results"><thead><tr>${RESULT_COLUMNS.map((c) => `<th>${esc(c)}</th>`).join('')}</tr></thead><tbody>${rows}</tbody></table></div>
<dl class="columns">${COLUMN_DEFINITIONS.map(([c, meaning]) => `<dt>${esc(c)}</dt><dd>${esc(meaning)}</dd>`).join('')}</dl>
${sections}
</body></html>
`;
}

/** The row's and the badge's class: passed, failed, or neither (inconclusive). */
function verdictClass(verdict: Verdict): 'ok' | 'bad' | 'inconclusive' {
  return verdict.ok ? 'ok' : verdict.inconclusive ? 'inconclusive' : 'bad';
}
