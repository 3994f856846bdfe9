/** A JSON answer of the sender's API: its status, its parsed body (undefined when empty), its text and headers. */
export interface ApiAnswer<T> {
  status: number;
  body: T;
  text: string;
  headers: Headers;
}

/**
 * Calls the sender's API as a client does: the key as a bearer token, a JSON body when given,
 * `headers` beside them, the answer parsed. `base` is read at each call (a test's server starts
 * after the client is made).
 *
 * @example
 * ```ts
 * const call = apiClient(() => base, 'sk_test_...');
 * const { status, body } = await call<{ data: Customer }>('POST', '/customers', customer);
 * ```
 */
export function apiClient(base: () => string, key: string) {
  return async <T>(
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ): Promise<ApiAnswer<T>> => {
    const res = await fetch(`${base()}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${key}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...headers,
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return {
      status: res.status,
      body: (text ? JSON.parse(text) : undefined) as T,
      text,
      headers: res.headers,
    };
  };
}
