/**
 * True for `application/json` and `application/<anything>+json`, any parameters (charset) allowed.
 *
 * @example
 * ```ts
 * isJsonContentType('application/json; charset=utf-8'); // true
 * isJsonContentType('text/plain'); // false
 * ```
 */
export function isJsonContentType(contentType: string | undefined): boolean {
  if (!contentType) return false;
  const semi = contentType.indexOf(';');
  const type = (semi === -1 ? contentType : contentType.slice(0, semi)).trim().toLowerCase();
  return type === 'application/json' || (type.startsWith('application/') && type.endsWith('+json'));
}
