import { createHash } from 'node:crypto';

/*
 * The dashboard's only assets, built into the package (nothing is fetched from elsewhere): one
 * style sheet and one small script. Every page works without the script; it adds the live view
 * (server-sent events) and nothing else.
 */

const CSS = `
:root { color-scheme: light; --fg: #1b1f24; --muted: #57606a; --line: #d0d7de; --bg: #fff; --soft: #f6f8fa;
  --ok: #1a7f37; --bad: #cf222e; --wait: #9a6700; --accent: #0969da; font: 15px/1.5 system-ui, sans-serif; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--fg); background: var(--bg); }
a { color: var(--accent); }
:focus-visible { outline: 3px solid var(--accent); outline-offset: 2px; }
.skip { position: absolute; left: -999px; } .skip:focus { left: 8px; top: 8px; background: var(--bg); padding: 4px 8px; z-index: 2; }
header { display: flex; flex-wrap: wrap; gap: 16px; align-items: center; padding: 10px 20px; border-bottom: 1px solid var(--line); background: var(--soft); }
header .brand { font-weight: 700; } header nav ul { display: flex; gap: 14px; list-style: none; margin: 0; padding: 0; }
header nav a[aria-current="page"] { font-weight: 700; text-decoration-thickness: 3px; }
header .who { margin-left: auto; display: flex; gap: 10px; align-items: center; color: var(--muted); }
.mode { border: 1px solid currentColor; border-radius: 4px; padding: 0 6px; font-size: 13px; }
main { padding: 16px 20px 40px; max-width: 1200px; }
h1 { font-size: 22px; margin: 8px 0 14px; } h2 { font-size: 18px; margin: 22px 0 8px; } h3 { font-size: 16px; }
h1 code, h3 .mono { font-size: inherit; } dl { display: grid; grid-template-columns: max-content auto; gap: 2px 14px; } dd { margin: 0; }
table { border-collapse: collapse; width: 100%; } caption { text-align: left; color: var(--muted); padding: 4px 0; }
th, td { text-align: left; padding: 6px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { background: var(--soft); font-weight: 600; }
code, pre, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 13px; }
pre { background: var(--soft); border: 1px solid var(--line); padding: 10px; overflow: auto; max-height: 420px; }
form.inline { display: inline; } form.filters, form.row { display: flex; flex-wrap: wrap; gap: 10px; align-items: end; margin: 8px 0 14px; }
label { display: flex; flex-direction: column; font-size: 13px; color: var(--muted); gap: 2px; }
input, select, button { font: inherit; padding: 5px 8px; border: 1px solid var(--line); border-radius: 6px; color: var(--fg); background: var(--bg); }
input[type=url], input[type=password] { min-width: 320px; }
button { background: var(--soft); cursor: pointer; } button.primary { background: var(--accent); color: #fff; border-color: var(--accent); }
button.danger { color: var(--bad); border-color: var(--bad); }
.status { white-space: nowrap; font-weight: 600; }
.status.delivered, .status.ok { color: var(--ok); } .status.failed, .status.bad { color: var(--bad); } .status.pending, .status.none { color: var(--wait); }
.notice { border: 1px solid var(--ok); padding: 8px 12px; border-radius: 6px; margin: 8px 0; }
.error { border: 1px solid var(--bad); padding: 8px 12px; border-radius: 6px; margin: 8px 0; }
.muted { color: var(--muted); } .pager { display: flex; gap: 16px; margin: 12px 0; }
.live { border: 1px solid var(--line); border-radius: 6px; padding: 6px 10px; margin-top: 18px; }
.live ol { margin: 4px 0; padding-left: 20px; max-height: 220px; overflow: auto; }
.card { max-width: 460px; margin: 60px auto; border: 1px solid var(--line); border-radius: 8px; padding: 20px 24px; }
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
      if (!wanted || a.event_id === wanted) relevant = true;
      if (!log) return;
      var item = document.createElement('li');
      item.textContent = a.at.slice(11, 19) + '  ' + a.event_type + '  ' + a.url + '  ' +
        (a.status_code === null ? (a.error_code || 'no response') : 'HTTP ' + a.status_code) +
        '  ' + a.latency_ms + ' ms  (' + a.status + ')';
      log.insertBefore(item, log.firstChild);
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
