/** A JSON answer of the sender's API: its status and its parsed body. */
export interface ApiAnswer<T> {
  status: number;
  body: T;
}

/**
 * Calls the sender's API as a client does: the key as a bearer token, a JSON body when given, the
 * answer parsed. `base` is read at each call (a test's server starts after the client is made).
 *
 * @example
 * ```ts
 * const call = apiClient(() => base, 'sk_test_...');
 * const { status, body } = await call<{ data: Customer }>('POST', '/customers', customer);
 * ```
 */
export function apiClient(base: () => string, key: string) {
  return async <T>(method: string, path: string, body?: unknown): Promise<ApiAnswer<T>> => {
    const res = await fetch(`${base()}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${key}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as T };
  };
}
