import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { type Principal, principalOfKeyHash } from '../auth/api-keys.js';
import type { ConfiguredKey } from '../config.js';
import type { Database } from '../db/database.js';

/** The session cookie's name. */
export const SESSION_COOKIE = 'payhook_session';

/** How long a sign-in lasts: 8 hours, a working day. */
export const SESSION_SECONDS = 8 * 3600;

/** A signed-in dashboard: whose, and the token its forms carry. */
export interface DashboardSession {
  principal: Principal;
  csrfToken: string;
  idHash: string;
}

const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');

/** The value of cookie `name` in a Cookie header, if present. */
export function readCookie(header: string | undefined, name: string): string | undefined {
  for (const part of (header ?? '').split(';')) {
    const at = part.indexOf('=');
    if (at > 0 && part.slice(0, at).trim() === name) return part.slice(at + 1).trim();
  }
  return undefined;
}

/**
 * The Set-Cookie header of a session: HttpOnly (no script reads it), SameSite=Strict (no other
 * site's page sends it), scoped to the dashboard, Secure when the request came over HTTPS.
 */
function sessionCookie(request: FastifyRequest, value: string, maxAge: number): string {
  const secure = request.protocol === 'https' ? '; Secure' : '';
  return `${SESSION_COOKIE}=${value}; Path=/dashboard; HttpOnly; SameSite=Strict; Max-Age=${maxAge}${secure}`;
}

/**
 * Signs in with an API key's hash: stores a new session (by the hash of its cookie, with the key's
 * hash so that revoking the key ends it) and sets its cookie. Expired sessions are removed on the way.
 */
export async function startSession(
  database: Database,
  request: FastifyRequest,
  reply: FastifyReply,
  principal: Principal,
  keyHash: string,
): Promise<void> {
  const id = randomBytes(32).toString('base64url');
  const now = new Date();
  await database.db.deleteFrom('dashboard_sessions').where('expires_at', '<', now).execute();
  await database.db
    .insertInto('dashboard_sessions')
    .values({
      id_hash: sha256(id),
      key_hash: keyHash,
      business_id: principal.businessId,
      mode: principal.mode,
      csrf_token: randomBytes(24).toString('base64url'),
      expires_at: new Date(now.getTime() + SESSION_SECONDS * 1000),
    })
    .execute();
  reply.header('set-cookie', sessionCookie(request, id, SESSION_SECONDS));
}

/**
 * The request's session, if its cookie names one that has not expired and whose key is still
 * valid (a key revoked, or removed from the configuration, ends its sessions).
 */
export async function readSession(
  database: Database,
  configured: readonly ConfiguredKey[],
  request: FastifyRequest,
): Promise<DashboardSession | undefined> {
  const id = readCookie(request.headers.cookie, SESSION_COOKIE);
  if (!id || id.length > 100) return undefined;
  const idHash = sha256(id);
  const row = await database.db
    .selectFrom('dashboard_sessions')
    .select(['key_hash', 'business_id', 'mode', 'csrf_token'])
    .where('id_hash', '=', idHash)
    .where('expires_at', '>', new Date())
    .executeTakeFirst();
  if (!row) return undefined;
  const principal = await principalOfKeyHash(database.db, configured, row.key_hash);
  if (!principal || principal.businessId !== row.business_id || principal.mode !== row.mode) return undefined;
  return { principal, csrfToken: row.csrf_token, idHash };
}

/** Signs out: the session is deleted and its cookie cleared. */
export async function endSession(
  database: Database,
  request: FastifyRequest,
  reply: FastifyReply,
  session: DashboardSession | undefined,
): Promise<void> {
  if (session)
    await database.db.deleteFrom('dashboard_sessions').where('id_hash', '=', session.idHash).execute();
  reply.header('set-cookie', sessionCookie(request, '', 0));
}

/** True when `given` (a form's `_csrf`) is the session's token, compared in constant time. */
export function csrfMatches(session: DashboardSession, given: unknown): boolean {
  if (typeof given !== 'string') return false;
  const a = Buffer.from(given);
  const b = Buffer.from(session.csrfToken);
  return a.length === b.length && timingSafeEqual(a, b);
}
