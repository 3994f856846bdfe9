#!/usr/bin/env node
// Part of `pnpm lint`: every relative link in the repository's Markdown resolves. A link to a file
// or folder needs it to exist; a `#anchor` (alone, or after a Markdown file) needs a heading of
// that file whose GitHub anchor it is, or an HTML `id`/`name` there. Anchors are made as GitHub
// makes them (github-slugger): the heading's text, lower-cased, without punctuation but `-` and
// `_`, spaces as `-`, and `-1`, `-2`... for a repeated heading. Links outside the repository
// (`https:`, `mailto:`...) are not followed. Fenced code and inline code are not read.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const SKIPPED_DIRS = new Set(['node_modules', '.git', 'dist']);

/** GitHub's anchor for a heading's text (before making repeated ones unique). */
export function slug(text) {
  return text
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-');
}

/** The text GitHub shows for a heading's Markdown: code, links, images and emphasis unwrapped. */
function headingText(markdown) {
  return markdown
    .replace(/!\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/`([^`]*)`/g, '$1')
    .replace(/<[^>]+>/g, '')
    .replace(/(\*{1,3}|\b_{1,3}|_{1,3}\b)(?=\S)([^*]*?\S)\1/g, '$2')
    .trim();
}

/** The lines of a Markdown text outside fenced code blocks, with their numbers (from 1). */
function proseLines(text) {
  const out = [];
  let fence;
  text.split('\n').forEach((line, i) => {
    const marker = /^\s{0,3}(`{3,}|~{3,})/.exec(line)?.[1];
    if (fence) {
      if (marker && marker[0] === fence[0] && marker.length >= fence.length) fence = undefined;
    } else if (marker) {
      fence = marker;
    } else {
      out.push({ line, number: i + 1 });
    }
  });
  return out;
}

/** Every anchor a Markdown text defines: its headings' (made unique as GitHub does) and HTML ids. */
export function anchorsOf(text) {
  const anchors = new Set();
  const seen = new Map();
  const lines = proseLines(text);
  const add = (heading) => {
    const base = slug(headingText(heading));
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    anchors.add(count === 0 ? base : `${base}-${count}`);
  };
  lines.forEach(({ line }, i) => {
    const atx = /^\s{0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$/.exec(line);
    if (atx) add(atx[1]);
    else if (/^\s{0,3}(=+|-+)\s*$/.test(line) && i > 0 && lines[i - 1].line.trim() !== '') {
      // A setext heading: the line above, underlined (a `---` under a blank line is a rule).
      if (lines[i - 1].number === lines[i].number - 1 && !/^\s*[-*+|]/.test(lines[i - 1].line)) {
        add(lines[i - 1].line.trim());
      }
    }
    for (const match of line.matchAll(/<[a-z][^>]*\s(?:id|name)="([^"]+)"/gi)) anchors.add(match[1]);
  });
  return anchors;
}

/** The link targets of a Markdown text, with their line numbers: inline links and definitions. */
export function linksOf(text) {
  const links = [];
  for (const { line, number } of proseLines(text)) {
    const prose = line.replace(/(`+)[^`]*?\1/g, '');
    for (const match of prose.matchAll(/\]\(\s*<?([^\s)>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      links.push({ target: match[1], line: number });
    }
    const definition = /^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+["'(].*)?$/.exec(prose);
    if (definition) links.push({ target: definition[1], line: number });
  }
  return links;
}

/** The Markdown files under `dir`, recursively, without dependencies, builds and Git's folder. */
export function markdownFiles(dir) {
  const out = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      if (!SKIPPED_DIRS.has(entry.name)) out.push(...markdownFiles(path));
    } else if (entry.name.endsWith('.md')) {
      out.push(path);
    }
  }
  return out.sort();
}

/** What is wrong with the relative links of the Markdown under `base`, one line each. */
export function linkProblems(base = root) {
  const problems = [];
  const anchorCache = new Map();
  const anchors = (file) => {
    if (!anchorCache.has(file)) anchorCache.set(file, anchorsOf(readFileSync(file, 'utf8')));
    return anchorCache.get(file);
  };
  for (const file of markdownFiles(base)) {
    for (const { target, line } of linksOf(readFileSync(file, 'utf8'))) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('//')) continue;
      const [pathPart, anchor] = target.split('#', 2);
      const path = decodeURIComponent(pathPart);
      const where = `${relative(base, file)}:${line}`;
      const linked =
        path === ''
          ? file
          : resolve(
              path.startsWith('/') ? base : dirname(file),
              `.${path.startsWith('/') ? '' : '/'}${path}`,
            );
      if (!existsSync(linked)) {
        problems.push(`${where}: ${target}: no ${relative(base, linked) || '.'}`);
        continue;
      }
      if (anchor === undefined || anchor === '') continue;
      if (statSync(linked).isDirectory() || !linked.endsWith('.md')) continue;
      if (!anchors(linked).has(decodeURIComponent(anchor).toLowerCase())) {
        problems.push(
          `${where}: ${target}: no heading with the anchor #${anchor} in ${relative(base, linked)}`,
        );
      }
    }
  }
  return problems;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const problems = linkProblems();
  if (problems.length > 0) {
    console.error(`check-links: ${problems.length} broken link(s):\n${problems.join('\n')}`);
    process.exit(1);
  }
  console.log('check-links: every relative link and anchor in the Markdown resolves');
}
