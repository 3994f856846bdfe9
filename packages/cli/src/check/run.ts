import type { CheckCase } from './cases.js';

/** What one case came to. */
export interface CaseResult {
  name: string;
  /** `200`, or `4xx` for a refusal. */
  expected: '200' | '4xx';
  /** The status answered; null when none came (time-out, connection closed). */
  status: number | null;
  /** The receiver's error code, from a JSON body `{"error":{"code":...}}` (payhook's receivers answer one); null otherwise. */
  code: string | null;
  latencyMs: number;
  ok: boolean;
  /** Why it failed (empty when it passed). */
  detail: string;
}

/** The receiver could not be reached at all (before any case could be judged). */
export class UnreachableError extends Error {
  override readonly name = 'UnreachableError';
}

/** What a first request failing with means that nothing answers at that address. */
const UNREACHABLE = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'bad port',
]);

/** `error.code` of a JSON body `{"error":{"code":"..."}}`, or null for any other body. */
export function errorCodeOf(body: string): string | null {
  try {
    const code = (JSON.parse(body) as { error?: { code?: unknown } } | null)?.error?.code;
    return typeof code === 'string' && code !== '' ? code : null;
  } catch {
    return null;
  }
}

const cause = (error: unknown) =>
  (error as { cause?: { code?: string } }).cause?.code ?? (error as Error).message ?? String(error);

/**
 * Sends each case to `url`, one after another, and judges the answer: an accepted case needs 200
 * (the only status the sender counts as delivered), a refused one a 4xx (a 5xx makes the sender
 * retry for 48 hours, a 2xx accepts a forgery); any answer slower than `timeoutMs` fails.
 */
export async function runCases(
  url: string,
  cases: readonly CheckCase[],
  timeoutMs: number,
): Promise<CaseResult[]> {
  const results: CaseResult[] = [];
  for (const c of cases) {
    const expected = c.expected === 'accept' ? '200' : '4xx';
    const t0 = performance.now();
    let status: number | null = null;
    let code: string | null = null;
    let detail = '';
    try {
      const response = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'user-agent': 'payhook-check', ...c.headers },
        body: c.body,
        redirect: 'manual',
        signal: AbortSignal.timeout(timeoutMs),
      });
      const body = await response.text();
      status = response.status;
      code = errorCodeOf(body);
    } catch (error) {
      const name = (error as Error).name;
      const reason = cause(error);
      if (results.length === 0 && UNREACHABLE.has(reason)) {
        throw new UnreachableError(`cannot reach ${url}: ${reason}`);
      }
      detail =
        name === 'TimeoutError'
          ? `no answer within ${timeoutMs} ms (the sender gives up after 15 s and retries)`
          : `no answer: ${reason}`;
    }
    const latencyMs = Math.round(performance.now() - t0);
    let ok = false;
    if (status !== null) {
      if (latencyMs > timeoutMs) {
        detail = `answered after ${latencyMs} ms; the sender gives up after ${timeoutMs} ms`;
      } else if (c.expected === 'accept') {
        ok = status === 200;
        if (!ok) {
          detail = `${c.wrong}${status === 403 ? " (403: is this machine in the receiver's IP allow-list?)" : ''}${status >= 300 && status < 400 ? ' (a redirect is not followed by the sender)' : ''}`;
        }
      } else {
        ok = status >= 400 && status < 500;
        if (!ok) {
          detail =
            status >= 500
              ? 'a 5xx makes the sender retry this for 48 hours: refuse it with a 4xx'
              : status >= 300 && status < 400
                ? 'a redirect is not a refusal: answer a 4xx'
                : c.wrong;
        }
      }
    }
    results.push({ name: c.name, expected, status, code, latencyMs, ok, detail });
  }
  return results;
}
