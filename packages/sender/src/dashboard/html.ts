/** Markup that is already safe: what {@link html} returns, and what it inserts unescaped. */
export class Html {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

const ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

/** Text made safe for HTML content and quoted attribute values. */
export const escapeHtml = (text: string): string => text.replace(/[&<>"']/g, (c) => ESCAPES[c] as string);

type Value = Html | string | number | boolean | null | undefined | readonly Value[];

function render(value: Value): string {
  if (value === null || value === undefined || value === false) return '';
  if (value instanceof Html) return value.text;
  if (Array.isArray(value)) return value.map(render).join('');
  return escapeHtml(String(value));
}

/**
 * A template tag for the dashboard's pages: every interpolated value is escaped unless it is
 * {@link Html} already (another `html` fragment); arrays are joined, and `null`, `undefined` and
 * `false` render nothing, so `${cond && html`...`}` works.
 *
 * @example
 * ```ts
 * html`<td>${event.type}</td>`; // a type of `<script>` renders as text
 * ```
 */
export function html(strings: TemplateStringsArray, ...values: Value[]): Html {
  let out = strings[0] as string;
  for (let i = 0; i < values.length; i++) out += render(values[i] as Value) + (strings[i + 1] as string);
  return new Html(out);
}
