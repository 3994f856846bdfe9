#!/usr/bin/env node
// `pnpm bench:readme`: writes the figures of bench/README.md from bench/results/*.json, so that the
// figures cannot drift from the results. `--check` (part of `pnpm lint`) writes nothing and fails
// when the file differs from what this would write.
//
// Only the blocks between `<!-- generated: <name> -->` and `<!-- /generated -->` are written: the
// table of runs (`runs`) and one section per results file (its name). Text outside them is kept,
// so the introduction and any note between sections are hand-written. A results file without a
// block gets one at the end; a block whose results file is gone is removed. A section's first
// lines are the benchmark script's header comment, cut to its first sentences.
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { generic, RENDERERS, table } from './bench-tables.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const benchDir = join(root, 'bench');
const resultsDir = join(benchDir, 'results');
const readmePath = join(benchDir, 'README.md');
const BLOCK = /<!-- generated: ([\w.-]+) -->\n[\s\S]*?<!-- \/generated -->\n?/g;

// The order of the sections: the receiver's, then the sender's; others follow by name.
const ORDER = Object.keys(RENDERERS);

// The introduction of a README made from nothing; once the file exists, its own text is kept.
const INTRO = `# Benchmarks

Each section below is written from \`results/<name>.json\` by \`pnpm bench:readme\`; \`pnpm lint\`
fails when it differs from what the results give. Run a benchmark with \`pnpm bench:<name>\`.

`;

function results() {
  const names = readdirSync(resultsDir)
    .filter((f) => f.endsWith('.json'))
    .map((f) => f.slice(0, -'.json'.length));
  const rank = (n) => (ORDER.includes(n) ? ORDER.indexOf(n) : ORDER.length);
  names.sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
  return names.map((name) => {
    try {
      return { name, ...JSON.parse(readFileSync(join(resultsDir, `${name}.json`), 'utf8')) };
    } catch (error) {
      return { name, invalid: error.message.replace(/\s+/g, ' ').trim() };
    }
  });
}

/** The first sentences of the script's header comment, without its `pnpm bench:x —` lead. */
export function description(name) {
  const file = join(benchDir, `${name}.ts`);
  if (!existsSync(file)) return undefined;
  const header = /^(?:#!.*\n)?\s*\/\*\*([\s\S]*?)\*\//.exec(readFileSync(file, 'utf8'));
  if (!header) return undefined;
  // Blocks of the comment: paragraphs, and each item of a list on its own.
  const blocks = [];
  let current = [];
  const flush = () => {
    if (current.length > 0) blocks.push(current.join(' ').replace(/\s+/g, ' ').trim());
    current = [];
  };
  for (const raw of header[1].split('\n')) {
    const line = raw.replace(/^\s*\* ?/, '');
    if (line.trim() === '') flush();
    else if (/^\s*(?:\d+\.|-)\s+/.test(line)) {
      flush();
      current.push(line.replace(/^\s*(?:\d+\.|-)\s+/, ''));
    } else current.push(line);
  }
  flush();
  const lead = (block) => (block ?? '').replace(/:$/, '.');
  let text = lead(blocks[0]).replace(/^pnpm bench:[\w-]+\s*[—-]+\s*/, '');
  // A lead too short to say what is measured ("what the dashboard costs.") takes the next block.
  if (text.length < 80 && blocks[1] && !blocks[1].endsWith(':')) text = `${text} ${lead(blocks[1])}`;
  const sentences = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '(') depth++;
    else if (c === ')') depth = Math.max(0, depth - 1);
    else if (
      c === '.' &&
      depth === 0 &&
      (i === text.length - 1 || /\s[A-Z`]/.test(text.slice(i + 1, i + 3)))
    ) {
      sentences.push(text.slice(start, i + 1).trim());
      start = i + 1;
    }
  }
  if (start < text.length && text.slice(start).trim()) sentences.push(`${text.slice(start).trim()}.`);
  let out = sentences[0] ?? '';
  if (sentences[1] && out.length + sentences[1].length < 420) out = `${out} ${sentences[1]}`;
  return out.charAt(0).toUpperCase() + out.slice(1);
}

const day = (iso) => (typeof iso === 'string' ? iso.slice(0, 10) : 'unknown date');

function section(run) {
  const lines = [`## ${run.name}`, ''];
  const about = description(run.name);
  if (about) lines.push(about, '');
  if (run.invalid) {
    lines.push(`\`results/${run.name}.json\` could not be read: ${run.invalid}`, '');
    return lines.join('\n');
  }
  const command = existsSync(join(benchDir, `${run.name}.ts`)) ? `\`pnpm bench:${run.name}\`, ` : '';
  lines.push(`${command}run on ${day(run.date)}, Node ${run.node ?? '?'} (${run.platform ?? '?'}).`, '');
  const render = RENDERERS[run.name];
  let body;
  if (render) {
    try {
      body = render(run.results);
    } catch (error) {
      body = `(The results no longer have the shape this section reads (${error.message}); every number as it is:)\n\n${generic(run.results)}`;
    }
  } else body = generic(run.results);
  lines.push(body, '');
  return lines.join('\n');
}

function runsTable(runs) {
  return `${table(
    ['benchmark', 'run with', 'run on', 'Node', 'platform'],
    runs.map((r) => [
      `[${r.name}](#${r.name})`,
      existsSync(join(benchDir, `${r.name}.ts`)) ? `\`pnpm bench:${r.name}\`` : '',
      day(r.date),
      r.node ?? '',
      r.platform ?? '',
    ]),
  )}\n`;
}

const block = (name, body) => `<!-- generated: ${name} -->\n${body.trimEnd()}\n<!-- /generated -->\n`;

/** The README as it should be, given the one there now (or none). */
export function render(current) {
  const runs = results();
  const bodies = new Map([['runs', runsTable(runs)], ...runs.map((r) => [r.name, section(r)])]);
  let text = current ?? `${INTRO}${block('runs', '')}\n`;
  const seen = new Set();
  text = text.replace(BLOCK, (_, name) => {
    if (!bodies.has(name) || seen.has(name)) return '';
    seen.add(name);
    return block(name, bodies.get(name));
  });
  for (const [name, body] of bodies) if (!seen.has(name)) text = `${text.trimEnd()}\n\n${block(name, body)}`;
  return `${text.replace(/\n{3,}/g, '\n\n').trimEnd()}\n`;
}

const current = existsSync(readmePath) ? readFileSync(readmePath, 'utf8') : undefined;
const wanted = render(current);
if (process.argv.includes('--check')) {
  if (current !== wanted) {
    console.error(
      'bench/README.md differs from what bench/results/*.json give: run `pnpm bench:readme` and commit the result.',
    );
    process.exit(1);
  }
} else if (current !== wanted) {
  writeFileSync(readmePath, wanted);
  console.log('bench/README.md written');
} else console.log('bench/README.md is up to date');
