// A domain label: letters and digits of any script, hyphens inside, 1 to 63 characters.
const LABEL = /^[\p{L}\p{N}](?:[\p{L}\p{M}\p{N}-]{0,61}[\p{L}\p{M}\p{N}])?$/u;
// Whitespace, control and format characters (CR, LF, NUL, tab, zero-width ones): never in an address.
const FORBIDDEN = /[\s\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/u;

/**
 * Why a customer's email address is refused, or `undefined` if it is accepted. The rules
 * (docs/decisions.md, "Customer emails"): at most 254 characters; no whitespace, control or format
 * character anywhere (so no CR or LF that could reach a mail header); exactly one `@`; a local part
 * of 1 to 64 characters; a domain of at least two dot-separated labels, each 1 to 63 letters,
 * digits or inner hyphens (any script), the last one not all digits. No quoted local parts, no IP
 * literals: no payer needs one.
 *
 * @example
 * ```ts
 * emailProblem('ngozi@example.com'); // undefined
 * emailProblem('ngozi@localhost');   // 'must have a domain with a dot, such as example.com'
 * ```
 */
export function emailProblem(email: string): string | undefined {
  if (email.length > 254) return 'must be at most 254 characters';
  if (FORBIDDEN.test(email)) return 'must not contain spaces, line breaks or control characters';
  const at = email.indexOf('@');
  if (at === -1 || email.indexOf('@', at + 1) !== -1) return 'must contain exactly one @';
  const local = email.slice(0, at);
  const domain = email.slice(at + 1);
  if (local.length === 0 || local.length > 64) return 'must have 1 to 64 characters before the @';
  const labels = domain.split('.');
  if (labels.length < 2) return 'must have a domain with a dot, such as example.com';
  if (!labels.every((label) => LABEL.test(label)) || /^[0-9]+$/.test(labels[labels.length - 1] as string)) {
    return 'must have a domain of letters, digits and hyphens, such as example.com';
  }
  return undefined;
}
