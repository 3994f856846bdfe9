import { createHash } from 'node:crypto';

/*
 * The dashboard's only assets, built into the package (nothing is fetched from elsewhere): one
 * style sheet and one small script. Every page works without the script; it adds the live view
 * (server-sent events) and nothing else.
 */

const CSS = `
:root { color-scheme: light; --fg: #1b1f24; --muted: #57606a; --line: #d0d7de; --bg: #fff; --soft: #f6f8fa;
  --ok: #1a7f37; --bad: #cf222e; --wait: #9a6700; --accent: #0969da; --accent-dark: #0550ae;
  --radius: 6px; font: 15px/1.5 system-ui, sans-serif; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--fg); background: var(--bg); }
a { color: var(--accent); }
:focus-visible { outline: 3px solid var(--accent); outline-offset: 2px; }
.skip { position: absolute; left: -999px; } .skip:focus { left: 8px; top: 8px; background: var(--bg); padding: 4px 8px; z-index: 2; }
header { display: flex; flex-wrap: wrap; gap: 8px 16px; align-items: center; padding: 10px 20px; border-bottom: 1px solid var(--line); background: var(--soft); }
header .brand { font-weight: 700; display: flex; align-items: center; gap: 6px; }
header .brand::before { content: ""; width: 18px; height: 18px; border-radius: 5px; background: var(--accent); }
header nav ul { display: flex; flex-wrap: wrap; gap: 4px 14px; list-style: none; margin: 0; padding: 0; }
header nav a[aria-current="page"] { font-weight: 700; text-decoration-thickness: 3px; }
header .who { margin-left: auto; display: flex; flex-wrap: wrap; gap: 6px 10px; align-items: center; color: var(--muted); }
.mode { border: 1px solid currentColor; border-radius: 4px; padding: 0 6px; font-size: 13px; }
main { padding: 16px 20px 40px; max-width: 1200px; }
h1 { font-size: 22px; margin: 8px 0 14px; } h2 { font-size: 18px; margin: 24px 0 8px; } h3 { font-size: 16px; }
h1 code, h3 .mono { font-size: inherit; } dl { display: grid; grid-template-columns: max-content minmax(0, 1fr); gap: 2px 14px; } dd { margin: 0; overflow-wrap: anywhere; }
.url, .mono, .secret { overflow-wrap: anywhere; word-break: break-word; }
.table-wrap { max-width: 100%; overflow-x: auto; }
table { border-collapse: collapse; width: 100%; } caption { text-align: left; color: var(--muted); padding: 4px 0; }
th, td { text-align: left; padding: 7px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { background: var(--soft); font-weight: 600; font-size: 13px; color: var(--muted); }
tbody tr:hover { background: #fbfcfd; }
table.linked-rows tbody tr { position: relative; } table.linked-rows tbody tr:hover { background: var(--soft); }
a.row-link::after { content: ""; position: absolute; inset: 0; }
code, pre, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 13px; }
pre { background: var(--soft); border: 1px solid var(--line); border-radius: var(--radius); padding: 10px; overflow: auto; max-height: 420px; }
form.inline { display: inline; }
form.filters, form.row { display: flex; flex-wrap: wrap; gap: 10px; align-items: end; margin: 8px 0 14px; }
form.stacked { display: grid; gap: 12px; max-width: 560px; margin: 8px 0 14px; }
label { display: flex; flex-direction: column; font-size: 13px; font-weight: 600; color: var(--muted); gap: 4px; }
label.check { flex-direction: row; align-items: center; gap: 8px; font-weight: 400; color: var(--fg); }
fieldset { border: 1px solid var(--line); border-radius: var(--radius); padding: 8px 12px; margin: 0; display: grid; gap: 6px; }
legend { font-size: 13px; font-weight: 600; color: var(--muted); padding: 0 4px; }
input, select, button { font: inherit; font-size: 14px; min-height: 36px; padding: 6px 10px; border: 1px solid var(--line); border-radius: var(--radius); color: var(--fg); background: var(--bg); }
input, select { font-weight: 400; box-shadow: inset 0 1px 2px rgba(27, 31, 36, 0.06); transition: border-color 0.15s, box-shadow 0.15s; }
input:hover, select:hover { border-color: #afb8c1; }
input:focus, select:focus { border-color: var(--accent); box-shadow: 0 0 0 3px rgba(9, 105, 218, 0.2); outline: none; }
input:focus-visible, select:focus-visible { outline: 3px solid var(--accent); outline-offset: 1px; }
input[type=checkbox] { min-height: 0; width: 16px; height: 16px; accent-color: var(--accent); box-shadow: none; }
input[type=url], input[type=password], input[type=text] { width: min(420px, 100%); }
select { appearance: none; padding-right: 30px; background-color: var(--bg);
  background-image: linear-gradient(45deg, transparent 50%, var(--muted) 50%), linear-gradient(135deg, var(--muted) 50%, transparent 50%);
  background-position: calc(100% - 16px) 55%, calc(100% - 11px) 55%; background-size: 5px 5px; background-repeat: no-repeat; }
button { background: var(--soft); cursor: pointer; font-weight: 600; box-shadow: 0 1px 0 rgba(27, 31, 36, 0.04); transition: background 0.15s, border-color 0.15s; }
button:hover { background: #eef1f4; border-color: #afb8c1; } button:active { background: #e4e8ec; }
button.primary { background: var(--accent); color: #fff; border-color: var(--accent); }
button.primary:hover { background: var(--accent-dark); border-color: var(--accent-dark); }
button.danger { color: var(--bad); border-color: rgba(207, 34, 46, 0.5); background: var(--bg); }
button.danger:hover { background: #fff0f0; border-color: var(--bad); }
.status { white-space: nowrap; font-weight: 600; }
.status.delivered, .status.ok { color: var(--ok); } .status.failed, .status.bad { color: var(--bad); } .status.pending, .status.none { color: var(--wait); }
.notice, .error, .warning, .info { border: 1px solid var(--ok); border-left-width: 4px; padding: 8px 12px; border-radius: var(--radius); margin: 8px 0; }
.notice p, .error p, .warning p, .info p { margin: 0; }
.error { border-color: var(--bad); background: #fff8f8; } .warning { border-color: var(--wait); background: #fffbeb; } .info { border-color: var(--muted); background: var(--soft); }
.muted { color: var(--muted); } .pager { display: flex; gap: 16px; margin: 12px 0; }
.live { border: 1px solid var(--line); border-radius: var(--radius); padding: 6px 10px; margin-top: 22px; }
.live h2 { margin-top: 6px; } .live .table-wrap { max-height: 320px; overflow: auto; }
.card { max-width: 460px; margin: 60px auto; border: 1px solid var(--line); border-radius: 8px; padding: 20px 24px; }
.card form { display: grid; gap: 12px; } .card input { width: 100%; }
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(min(100%, 420px), 1fr)); gap: 14px; }
.charts figure { margin: 0; border: 1px solid var(--line); border-radius: var(--radius); padding: 8px; }
.charts figcaption { font-size: 13px; color: var(--muted); }
svg.chart { width: 100%; height: auto; display: block; } svg.chart.narrow { display: none; } svg.chart.narrow .axis { font-size: 12px; }
svg.chart .ok { fill: var(--ok); opacity: 0.75; } svg.chart .fail { fill: var(--bad); opacity: 0.55; }
svg.chart .grid { stroke: var(--line); stroke-width: 1; } svg.chart .axis { fill: var(--muted); font-size: 11px; }
svg.chart polyline.latency { fill: none; stroke: var(--accent); stroke-width: 2; } svg.chart circle.latency { fill: var(--accent); }
svg.chart text.latency { fill: var(--accent); }
.legend .key { display: inline-block; width: 12px; height: 12px; border-radius: 2px; vertical-align: -1px; margin: 0 4px 0 10px; }
.legend .key.ok { background: var(--ok); } .legend .key.fail { background: var(--bad); } .legend .key.line { height: 3px; vertical-align: 3px; background: var(--accent); }
@media (max-width: 640px) {
  header { padding: 8px 12px; } main { padding: 12px 12px 32px; }
  table.stack thead { position: absolute; left: -9999px; }
  table.stack caption { display: block; width: 100%; }
  table.stack, table.stack tbody, table.stack tr, table.stack td { display: block; width: 100%; }
  table.stack tr { border: 1px solid var(--line); border-radius: var(--radius); margin: 0 0 10px; padding: 4px 0; }
  /* A card: each label floats in its own column, the value flows beside it, however many parts it has. */
  table.stack td { border: 0; padding: 3px 10px 3px 130px; display: flow-root; }
  table.stack td[data-label]::before { content: attr(data-label); float: left; width: 112px; margin-left: -120px; color: var(--muted); font: 600 13px/1.5 system-ui, sans-serif; overflow-wrap: anywhere; }
  table.stack td[colspan] { padding-left: 10px; }
  .table-wrap { overflow-x: visible; }
  input[type=url], input[type=password], input[type=text] { width: 100%; }
  dl { grid-template-columns: minmax(0, 1fr); } dt { font-weight: 600; margin-top: 6px; }
  svg.chart.wide { display: none; } svg.chart.narrow { display: block; }
}
`;

/** The script: live attempts over server-sent events, and a refresh of the live parts of the page. */
const JS = `
(function () {
  'use strict';
  var root = document.body;
  if (!root || !root.dataset.live || !window.EventSource) return;
  var log = document.getElementById('live-log');
  var state = document.getElementById('live-state');
  var wanted = root.dataset.liveEvent || '';
  var wantedUrl = root.dataset.liveUrl || '';
  var refreshing = false, again = false, last = 0;
  function say(text) { if (state) state.textContent = text; }
  function refresh() {
    if (refreshing) { again = true; return; }
    // A random part spreads the refreshes of the pages that got the same message.
    var wait = Math.max(0, last + 2000 - Date.now()) + Math.floor(Math.random() * 500);
    refreshing = true;
    setTimeout(function () {
      last = Date.now();
      fetch(location.href, { headers: { accept: 'text/html', 'x-payhook-refresh': 'live' }, credentials: 'same-origin' })
        .then(function (r) { return r.ok ? r.text() : ''; })
        .then(function (text) {
          if (!text) return;
          var next = new DOMParser().parseFromString(text, 'text/html');
          document.querySelectorAll('[data-live-region]').forEach(function (el) {
            var fresh = next.getElementById(el.id);
            if (fresh && fresh.innerHTML !== el.innerHTML && !el.contains(document.activeElement)) el.innerHTML = fresh.innerHTML;
          });
        })
        .catch(function () {})
        .then(function () { refreshing = false; if (again) { again = false; refresh(); } });
    }, wait);
  }
  var source = new EventSource(root.dataset.live);
  source.addEventListener('open', function () { say('Live: connected'); });
  source.addEventListener('error', function () { say('Live: reconnecting...'); });
  source.addEventListener('attempts', function (message) {
    var batch = JSON.parse(message.data);
    var relevant = false;
    batch.attempts.forEach(function (a) {
      if (wantedUrl && a.url !== wantedUrl) return;
      if (!wanted || a.event_id === wanted) relevant = true;
      if (!log) return;
      var ok = a.status_code === 200 && !a.error_code;
      var row = document.createElement('tr');
      [
        ['Time (UTC)', a.at.slice(11, 19)],
        ['Event', a.event_type],
        ['URL', a.url],
        ['Outcome', (ok ? '\u2713 ' : '\u2717 ') + (a.status_code === null ? (a.error_code || 'no response') : 'HTTP ' + a.status_code) + ' (' + a.status + ')'],
        ['Latency', a.latency_ms + ' ms']
      ].forEach(function (cell, i) {
        var td = document.createElement('td');
        td.textContent = cell[1];
        td.setAttribute('data-label', cell[0]);
        if (i === 2) td.className = 'mono url';
        if (i === 3) td.className = 'status ' + (ok ? 'ok' : 'bad');
        row.appendChild(td);
      });
      log.insertBefore(row, log.firstChild);
      while (log.children.length > 50) log.removeChild(log.lastChild);
    });
    if (relevant && document.querySelector('[data-live-region]')) refresh();
  });
})();
`;

/** An asset: its bytes, content type and the hash that names it (so it can be cached for good). */
export interface Asset {
  body: string;
  type: string;
  file: string;
}

const asset = (name: string, ext: string, body: string, type: string): Asset => ({
  body,
  type,
  file: `${name}.${createHash('sha256').update(body).digest('hex').slice(0, 12)}.${ext}`,
});

/** The dashboard's style sheet and script, by the file names pages link to. */
export const ASSETS = {
  css: asset('app', 'css', CSS, 'text/css'),
  js: asset('app', 'js', JS, 'text/javascript'),
};
