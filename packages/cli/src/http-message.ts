import { CliError } from './command.js';

/** Header lines and a body, as `payhook sign --secret` prints them and `payhook verify` reads them. */
export interface HttpMessage {
  /** Lower-case names, as Node gives them. */
  headers: Record<string, string>;
  body: string;
}

const HEADER_LINE = /^([A-Za-z0-9!#$%&'*+.^_`|~-]+):[ \t]*(.*?)[ \t]*$/;

/**
 * Writes headers and a body the way HTTP does: `name: value` lines, an empty line, the body.
 * With no headers, the body alone.
 */
export function formatHttpMessage(headers: Readonly<Record<string, string>>, body: string): string {
  const lines = Object.entries(headers).map(([name, value]) => `${name}: ${value}`);
  return lines.length === 0 ? body : `${lines.join('\n')}\n\n${body}`;
}

/**
 * Reads what {@link formatHttpMessage} writes. Text whose first line is not a `name: value` header
 * (a JSON body starts with `{`) is all body, so a bare body reads as before.
 */
export function parseHttpMessage(text: string): HttpMessage {
  const headers: Record<string, string> = {};
  if (!HEADER_LINE.test(text.slice(0, text.search(/\r?\n|$/)))) return { headers, body: text };
  let rest = text;
  for (;;) {
    const end = rest.search(/\r?\n/);
    if (end < 0)
      throw new CliError('The header lines on standard input end without an empty line before the body.');
    const line = rest.slice(0, end);
    rest = rest.slice(end + (rest[end] === '\r' ? 2 : 1));
    if (line === '') return { headers, body: rest };
    addHeader(headers, line);
  }
}

/** Adds one `name: value` line (from stdin or `--header`); a repeated name joins with a space. */
export function addHeader(headers: Record<string, string>, line: string): void {
  const match = HEADER_LINE.exec(line);
  if (!match) throw new CliError(`Not a header line ("name: value"): ${JSON.stringify(line.slice(0, 80))}.`);
  const name = (match[1] as string).toLowerCase();
  const value = match[2] as string;
  headers[name] = headers[name] === undefined ? value : `${headers[name]} ${value}`;
}
