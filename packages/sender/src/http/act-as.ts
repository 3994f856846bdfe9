import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, InjectOptions } from 'fastify';
import type { Principal } from '../auth/api-keys.js';
import type { Mode } from '../db/schema.js';

/** The header that carries an in-process caller's principal (never valid from outside). */
export const ACT_AS_HEADER = 'x-payhook-act-as';

/** A JSON API answer to an in-process request. */
export interface ApiAnswer<T = unknown> {
  status: number;
  body: T;
}

/**
 * Lets code in this process call the JSON API as a business, without its API key: the dashboard
 * renders what the API answers and acts through the API's own routes, so every rule (the
 * public-address check, the sandbox's states, validation, idempotency) has one owner.
 *
 * The principal travels in {@link ACT_AS_HEADER} with a token made at start-up that never leaves
 * the process (32 random bytes, compared in constant time): a request from the network that sends
 * the header is refused like a wrong key.
 */
export interface ActAs {
  /** Calls the API as `principal`; JSON answers are parsed. */
  call<T = unknown>(
    principal: Principal,
    request: Omit<InjectOptions, 'headers'> & { headers?: Record<string, string> },
  ): Promise<ApiAnswer<T>>;
  /** The principal a request's header names, if its token is this process's; otherwise undefined. */
  principalOf(header: string | string[] | undefined): Principal | undefined;
}

/** An {@link ActAs} for `app` (its `inject`). */
export function createActAs(app: FastifyInstance): ActAs {
  const token = randomBytes(32).toString('base64url');
  const tokenBytes = Buffer.from(token);
  return {
    async call(principal, request) {
      const response = await app.inject({
        ...request,
        headers: {
          ...request.headers,
          [ACT_AS_HEADER]: `${token} ${principal.mode} ${encodeURIComponent(principal.businessId)}`,
        },
      } as InjectOptions);
      const json = (response.headers['content-type'] ?? '').toString().includes('json');
      return {
        status: response.statusCode,
        body: json ? response.json() : response.body,
      } as ApiAnswer<never>;
    },
    principalOf(header) {
      if (typeof header !== 'string') return undefined;
      const [given = '', mode, businessId] = header.split(' ');
      const givenBytes = Buffer.from(given);
      if (givenBytes.length !== tokenBytes.length || !timingSafeEqual(givenBytes, tokenBytes))
        return undefined;
      if ((mode !== 'test' && mode !== 'live') || businessId === undefined) return undefined;
      return { businessId: decodeURIComponent(businessId), mode: mode as Mode };
    },
  };
}
