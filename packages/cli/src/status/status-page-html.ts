/**
 * The status page: one self-contained HTML document (no external script, style or font) that reads
 * `status.json` beside it every few seconds and redraws. Every value from Redis or PostgreSQL is
 * put in the page as text (textContent), never as markup: node ids and job names are user data.
 */
export function statusPageHtml(refreshMs: number): string {
  return PAGE.replace('__REFRESH_MS__', String(Math.max(250, Math.floor(refreshMs))));
}

const PAGE = String.raw`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>fenced status</title>
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5rem; color: #1d2330; background: #fbfbfd; }
  h1 { font-size: 1.3rem; margin: 0 0 .2rem; }
  h2 { font-size: 1.05rem; margin: 1.6rem 0 .5rem; }
  .meta { color: #5b6478; }
  table { border-collapse: collapse; min-width: 40rem; background: #fff; }
  th, td { text-align: left; padding: .3rem .7rem; border-bottom: 1px solid #e3e6ee; font-variant-numeric: tabular-nums; }
  th { background: #f0f2f7; font-weight: 600; }
  .leader { color: #0b6b2f; font-weight: 600; }
  .none { color: #a13a1f; font-weight: 600; }
  .late, .refused { background: #fff1e6; }
  .badge { display: inline-block; padding: 0 .4rem; border-radius: .6rem; font-size: .8rem; background: #ffe0c7; color: #8a3b00; }
  svg text { font: 11px system-ui, sans-serif; fill: #1d2330; }
  #error { color: #a13a1f; }
  .legend-item { display: inline-block; margin-right: .8rem; }
  .swatch { display: inline-block; width: .8rem; height: .8rem; border-radius: 50%; margin-right: .3rem; vertical-align: -.1rem; }
</style>
</head>
<body>
<h1>fenced status</h1>
<div class="meta">read at <span id="at">-</span> (Redis server clock), key prefix <span id="prefix">-</span>; refreshes every <span id="every"></span> s. <span id="error"></span></div>
<h2>Leases</h2>
<table id="leases"><thead><tr><th>lease</th><th>leader</th><th>token</th><th>time left</th><th>counter</th><th>last failover gap</th></tr></thead><tbody></tbody></table>
<h2>Last elections</h2>
<div id="timeline"></div>
<h2>Jobs: last fire and its lateness</h2>
<table id="jobs"><thead><tr><th>lease</th><th>job</th><th>last fire due</th><th>dispatched</th><th>lateness</th></tr></thead><tbody></tbody></table>
<h2>Resources</h2>
<table id="resources"><thead><tr><th>resource</th><th>fence</th><th>redis mark</th><th>last applied fire</th><th>applied fires</th><th>refused</th></tr></thead><tbody></tbody></table>
<h2>Refused writes</h2>
<table id="refusals"><thead><tr><th>resource</th><th>at</th><th>token</th><th>refused by fence</th><th>via</th><th>fire</th></tr></thead><tbody></tbody></table>
<script>
"use strict";
var REFRESH_MS = __REFRESH_MS__;
var LATE_MS = 1000;
document.getElementById("every").textContent = String(REFRESH_MS / 1000);
function ms(v) {
  if (v === null || v === undefined) return "-";
  if (v < 1000) return Math.round(v) + " ms";
  if (v < 60000) return (v / 1000).toFixed(1) + " s";
  return Math.round(v / 60000) + " min";
}
function cell(text, cls) {
  var td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  return td;
}
function fill(id, rows, empty) {
  var body = document.querySelector("#" + id + " tbody");
  body.replaceChildren();
  if (rows.length === 0) {
    var tr = document.createElement("tr");
    var td = cell(empty);
    td.colSpan = document.querySelectorAll("#" + id + " th").length;
    tr.appendChild(td);
    body.appendChild(tr);
    return;
  }
  rows.forEach(function (r) {
    var tr = document.createElement("tr");
    if (r.cls) tr.className = r.cls;
    if (r.data) Object.keys(r.data).forEach(function (k) { tr.dataset[k] = r.data[k]; });
    r.cells.forEach(function (c) { tr.appendChild(typeof c === "string" ? cell(c) : cell(c[0], c[1])); });
    body.appendChild(tr);
  });
}
var SVG = "http://www.w3.org/2000/svg";
function svgEl(name, attrs, text) {
  var el = document.createElementNS(SVG, name);
  Object.keys(attrs).forEach(function (k) { el.setAttribute(k, attrs[k]); });
  if (text !== undefined) el.textContent = text;
  return el;
}
var COLORS = ["#2b6cb0", "#c05621", "#2f855a", "#6b46c1", "#b83280", "#2c7a7b"];
function timeline(status) {
  var box = document.getElementById("timeline");
  box.replaceChildren();
  var leases = status.leases.filter(function (l) { return l.elections.length > 0; });
  if (leases.length === 0) { box.textContent = "no election recorded yet"; return; }
  var now = Date.parse(status.at);
  var from = now;
  leases.forEach(function (l) { l.elections.forEach(function (e) { from = Math.min(from, Date.parse(e.at)); }); });
  from -= 1000;
  var width = 900, left = 130, rowH = 34;
  var axisY = leases.length * rowH + 8;
  var svg = svgEl("svg", { width: String(width), height: String(axisY + 30), role: "img", "aria-label": "elections over time" });
  var x = function (t) { return left + ((t - from) / Math.max(1, now - from)) * (width - left - 20); };
  // The time scale: a tick every round step back from now (10 s, 1 min, 10 min, 1 h, 1 day…), at
  // most about 8 of them, each labelled with how long before the reading it is.
  var span = now - from;
  var steps = [1000, 5000, 10000, 30000, 60000, 300000, 600000, 1800000, 3600000, 21600000, 86400000, 604800000];
  var step = steps.find(function (s) { return span / s <= 8; }) || span / 8;
  var axis = svgEl("g", { "class": "axis" });
  axis.appendChild(svgEl("line", { x1: String(left), x2: String(width - 20), y1: String(axisY), y2: String(axisY), stroke: "#5b6478" }));
  for (var back = 0; back <= span; back += step) {
    var tx = x(now - back);
    axis.appendChild(svgEl("line", { x1: String(tx), x2: String(tx), y1: String(axisY), y2: String(axisY + 5), stroke: "#5b6478" }));
    axis.appendChild(svgEl("text", { x: String(tx - 12), y: String(axisY + 18), "class": "tick" }, back === 0 ? "now" : "-" + ms(back)));
  }
  svg.appendChild(axis);
  var nodes = {};
  leases.forEach(function (l, i) {
    var y = 14 + i * rowH;
    svg.appendChild(svgEl("text", { x: "0", y: String(y + 4) }, l.lease));
    svg.appendChild(svgEl("line", { x1: String(left), x2: String(width - 20), y1: String(y), y2: String(y), stroke: "#c9cfdb" }));
    l.elections.slice().reverse().forEach(function (e) {
      if (!(e.node in nodes)) nodes[e.node] = COLORS[Object.keys(nodes).length % COLORS.length];
      var cx = x(Date.parse(e.at));
      var g = svgEl("g", { "class": "election", "data-lease": l.lease, "data-node": e.node, "data-token": e.token });
      g.appendChild(svgEl("circle", { cx: String(cx), cy: String(y), r: "6", fill: nodes[e.node] }));
      g.appendChild(svgEl("text", { x: String(cx - 4), y: String(y + 20) }, e.token));
      g.appendChild(svgEl("title", {}, e.at + ": " + e.node + " elected with token " + e.token + (e.regressed ? " (counter repaired)" : "")));
      svg.appendChild(g);
    });
  });
  box.appendChild(svg);
  var legend = document.createElement("div");
  legend.className = "meta legend";
  legend.appendChild(document.createTextNode("each dot is an election (its token below it), coloured by node: "));
  Object.keys(nodes).forEach(function (node) {
    var item = document.createElement("span");
    item.className = "legend-item";
    item.setAttribute("data-node", node);
    var swatch = document.createElement("span");
    swatch.className = "swatch";
    swatch.style.background = nodes[node];
    item.appendChild(swatch);
    item.appendChild(document.createTextNode(node));
    legend.appendChild(item);
  });
  legend.appendChild(document.createTextNode("; the axis shows time before this reading"));
  box.appendChild(legend);
}
function render(status) {
  document.getElementById("at").textContent = status.at;
  document.getElementById("prefix").textContent = status.keyPrefix;
  fill("leases", status.leases.map(function (l) {
    return {
      data: { lease: l.lease, leader: l.leader ? l.leader.node : "", token: l.leader ? l.leader.token : "" },
      cells: [l.lease, l.leader ? [l.leader.node, "leader"] : ["(no leader)", "none"], l.leader ? l.leader.token : "-", ms(l.timeLeftMs), l.counter || "-", ms(l.failoverGapMs)],
    };
  }), "no lease under this prefix");
  timeline(status);
  var jobs = [];
  status.leases.forEach(function (l) {
    l.jobs.forEach(function (j) {
      var late = j.latenessMs !== null && j.latenessMs > LATE_MS;
      jobs.push({ cls: late ? "late" : "", data: { job: j.job }, cells: [l.lease, j.job, j.lastFire, j.dispatchedAt || "-", late ? [ms(j.latenessMs) + " late", "badge"] : ms(j.latenessMs)] });
    });
  });
  fill("jobs", jobs, "no fire dispatched yet");
  fill("resources", status.resources.map(function (r) {
    return {
      cls: r.refusals.length > 0 ? "refused" : "",
      data: { resource: r.resource },
      cells: [r.resource, r.fence || "-", r.mark || "-", r.lastAppliedFire ? r.lastAppliedFire.fireId + " (token " + r.lastAppliedFire.token + ")" : "-", r.appliedFires === null ? "-" : String(r.appliedFires), String(r.refusals.length)],
    };
  }), status.database ? "no fence yet" : "no resource seen (the server was started without a database)");
  var refusals = [];
  status.resources.forEach(function (r) {
    r.refusals.forEach(function (x) { refusals.push({ cls: "refused", data: { resource: r.resource, token: x.token }, cells: [r.resource, x.at, x.token, x.highest, x.via, x.fireId || "-"] }); });
  });
  fill("refusals", refusals, "no write refused");
}
function refresh() {
  fetch("status.json", { cache: "no-store" })
    .then(function (r) { if (!r.ok) throw new Error("status.json: HTTP " + r.status); return r.json(); })
    .then(function (s) { document.getElementById("error").textContent = ""; render(s); document.body.dataset.refreshed = String(Date.now()); })
    .catch(function (e) { document.getElementById("error").textContent = "could not refresh: " + e.message; })
    .finally(function () { setTimeout(refresh, REFRESH_MS); });
}
refresh();
</script>
</body>
</html>
`;
