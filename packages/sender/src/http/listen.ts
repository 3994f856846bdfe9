import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { isKnownEventName, KNOWN_EVENTS } from '@payhook/core';
import type { FastifyPluginAsync } from 'fastify';
import { Type } from 'typebox';
import type { Database } from '../db/database.js';
import { isConnectionLost } from '../db/health.js';
import { cliDestination } from '../delivery/destination.js';
import { ApiError } from '../errors.js';
import { recordListenerAttempts } from '../listen/record.js';
import { eventTail, type TailedEvent } from '../listen/tail.js';
import { signingKeyring } from '../signing/keyring.js';
import { VERSION } from '../version.js';
import { idempotentWrite } from './idempotency.js';
import { microsColumn, type Position } from './pagination.js';

/** How long after a listener's last event it may reconnect and get what it missed: 5 minutes. */
export const LISTEN_RESUME_WINDOW_SECONDS = 300;
/** A comment line this often keeps proxies (and the listener's dead-connection check) content. */
const KEEPALIVE_MS = 15_000;
/** How often an idle stream looks for new events. */
const POLL_MS = 100;
/** Events read per look. */
const PAGE = 500;
/** Streams one business (in one mode) may have open on one sender instance at once. */
export const MAX_LISTENERS_PER_BUSINESS = 10;

const LISTENER_ID = '^[A-Za-z0-9_-]{1,64}$';
/** A UUID as PostgreSQL reads one: anything else in Last-Event-ID is an unknown event, not a query. */
const UUID_TEXT = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const ListenQuery = Type.Object(
  {
    events: Type.Optional(
      Type.String({
        maxLength: 2000,
        description: `Only these event types, comma-separated (default: all): ${KNOWN_EVENTS.join(', ')}.`,
      }),
    ),
    listener_id: Type.Optional(
      Type.String({
        pattern: LISTENER_ID,
        description: 'Reconnect as this listener (the id the `ready` message gave); default: a new one.',
      }),
    ),
    after: Type.Optional(
      Type.String({
        format: 'uuid',
        description: `Resume after this event (the last one received; the Last-Event-ID header works too), if it is at most ${LISTEN_RESUME_WINDOW_SECONDS} s old: the events made since are sent first, in order.`,
      }),
    ),
    live: Type.Optional(
      Type.Union([Type.Literal('true'), Type.Literal('false')], {
        description: 'Must be true to listen with a live key: live events are real payments.',
      }),
    ),
  },
  { additionalProperties: false },
);

const ListenerAttempt = Type.Object(
  {
    delivery_id: Type.String({ format: 'uuid', description: 'The `delivery_id` the stream gave the event.' }),
    event_id: Type.String({ format: 'uuid' }),
    url: Type.String({ maxLength: 2048, description: 'The local URL the event was forwarded to.' }),
    started_at: Type.String({ format: 'date-time' }),
    latency_ms: Type.Integer({ minimum: 0, maximum: 86_400_000 }),
    status_code: Type.Union([Type.Integer({ minimum: 100, maximum: 599 }), Type.Null()]),
    response_body: Type.Union([Type.String({ maxLength: 4096 }), Type.Null()]),
    error: Type.Union([
      Type.Object(
        { code: Type.String({ maxLength: 100 }), message: Type.String({ maxLength: 1000 }) },
        { additionalProperties: false },
      ),
      Type.Null(),
    ]),
  },
  { additionalProperties: false, title: 'ListenerAttempt' },
);

const AttemptsBody = Type.Object(
  {
    listener_id: Type.String({ pattern: LISTENER_ID }),
    attempts: Type.Array(ListenerAttempt, { minItems: 1, maxItems: 1000 }),
  },
  { additionalProperties: false, title: 'ListenerAttempts' },
);

/** The body of `POST /listen/attempts`: what a listener did with the events it was sent. */
export interface ListenerAttemptsReport {
  listener_id: string;
  attempts: {
    /** The `delivery_id` the stream gave the event. */
    delivery_id: string;
    event_id: string;
    /** The local URL the event was forwarded to. */
    url: string;
    started_at: string;
    latency_ms: number;
    status_code: number | null;
    /** The first 4 KiB of the local answer. */
    response_body: string | null;
    error: { code: string; message: string } | null;
  }[];
}

const STREAM_DESCRIPTION = `A server-sent event stream of the key's business's new events, for \`payhook listen\`. The first message is \`ready\` (the listener's id, business, mode, and whether it resumed); then one \`webhook\` message per event, its SSE id the event's id and its data \`{delivery_id, event_id, type, headers, body}\`: the exact body and the signed headers a delivery sends. A comment line every ${KEEPALIVE_MS / 1000} s keeps the connection alive. Several listeners may be connected at once: each gets every event. Test keys only, unless live=true with a live key. Report what was done with each event to POST /listen/attempts: it is recorded as a delivery to \`cli:<listener id>\`.`;

/** Parses and checks `events=a,b`: each must be an event the service sends. */
function eventTypes(value: string | undefined): string[] | undefined {
  if (value === undefined || value.trim() === '') return undefined;
  const types = value.split(',').map((t) => t.trim());
  const unknown = types.filter((t) => !isKnownEventName(t));
  if (unknown.length > 0) {
    throw new ApiError('invalid_request', `Unknown event type ${JSON.stringify(unknown[0])}.`, {
      details: [{ field: 'events', message: `must list types among ${KNOWN_EVENTS.join(', ')}` }],
    });
  }
  return types;
}

/** Writes one server-sent event; resolves when the socket can take more. */
function send(
  raw: ServerResponse,
  message: { event: string; id?: string; data: unknown },
): Promise<void> | void {
  const text = `${message.id ? `id: ${message.id}\n` : ''}event: ${message.event}\ndata: ${JSON.stringify(message.data)}\n\n`;
  if (raw.write(text)) return;
  return new Promise((resolve) => {
    const done = () => {
      raw.off('drain', done);
      raw.off('close', done);
      resolve();
    };
    raw.on('drain', done);
    raw.on('close', done);
  });
}

/**
 * `GET /listen` (a server-sent event stream of new events, for `payhook listen`) and `POST
 * /listen/attempts` (what the listener did with them, recorded as deliveries to `cli:<id>`).
 * Decisions: docs/decisions.md, "payhook listen".
 */
export const listenRoutes: FastifyPluginAsync<{ database: Database }> = async (app, { database }) => {
  const { db } = database;
  const keyring = signingKeyring(database);
  const open = new Set<ServerResponse>();
  /** Open streams by business and mode. */
  const listeners = new Map<string, number>();
  // The streams never end by themselves: a shutdown ends them, so the server can close.
  app.addHook('preClose', async () => {
    for (const raw of open) raw.end();
  });

  app.get<{
    Querystring: { events?: string; listener_id?: string; after?: string; live?: 'true' | 'false' };
  }>(
    '/listen',
    {
      schema: {
        summary: 'Stream new events to a listener (server-sent events)',
        description: STREAM_DESCRIPTION,
        operationId: 'listen',
        querystring: ListenQuery,
        response: {
          200: {
            description: 'The event stream.',
            content: { 'text/event-stream': { schema: { type: 'string' } } },
          },
        },
      },
    },
    async (request, reply) => {
      const { businessId, mode } = request.principal;
      const live = request.query.live === 'true';
      if (mode === 'live' && !live) {
        throw new ApiError(
          'live_listen_not_requested',
          'This is a live key: live events are real payments. Add live=true (payhook listen --live) to listen to them.',
        );
      }
      if (mode === 'test' && live) {
        throw new ApiError('invalid_request', 'live=true takes a live key; this key is a test key.', {
          details: [{ field: 'live', message: 'takes a live key' }],
        });
      }
      const types = eventTypes(request.query.events);
      const listenerId = request.query.listener_id ?? `lst_${randomUUID().replaceAll('-', '').slice(0, 20)}`;
      const lastEventId = request.query.after ?? request.headers['last-event-id'];
      let after: Position | undefined;
      let resume: { resumed: boolean; reason?: string } | undefined;
      if (typeof lastEventId === 'string' && lastEventId !== '') {
        const row = UUID_TEXT.test(lastEventId)
          ? await db
              .selectFrom('events')
              .select(['id', microsColumn.as('micros')])
              .select((eb) =>
                eb('created_at', '>=', new Date(Date.now() - LISTEN_RESUME_WINDOW_SECONDS * 1000)).as(
                  'recent',
                ),
              )
              .where('id', '=', lastEventId)
              .where('business_id', '=', businessId)
              .where('mode', '=', mode)
              .executeTakeFirst()
          : undefined;
        if (!row) resume = { resumed: false, reason: 'unknown_event' };
        else if (!row.recent) resume = { resumed: false, reason: 'outside_window' };
        else {
          after = { micros: row.micros, id: row.id };
          resume = { resumed: true };
        }
      }

      // Counted with no await between the check and the stream's start: the limit holds.
      const owner = `${mode}:${businessId}`;
      if ((listeners.get(owner) ?? 0) >= MAX_LISTENERS_PER_BUSINESS) {
        throw new ApiError(
          'too_many_listeners',
          `This business has ${MAX_LISTENERS_PER_BUSINESS} listeners connected to this sender already: stop one first.`,
        );
      }
      listeners.set(owner, (listeners.get(owner) ?? 0) + 1);
      reply.hijack();
      const raw = reply.raw;
      raw.writeHead(200, {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-store',
        'x-accel-buffering': 'no',
        connection: 'keep-alive',
      });
      open.add(raw);
      let closed = false;
      let wake: (() => void) | undefined;
      raw.on('close', () => {
        closed = true;
        open.delete(raw);
        wake?.();
      });
      const keepalive = setInterval(() => raw.write(': keepalive\n\n'), KEEPALIVE_MS);
      const tail = eventTail(db, {
        businessId,
        mode,
        types,
        after,
        lookBehind: database.kind === 'postgres',
      });
      const headers = {
        'content-type': 'application/json',
        'user-agent': `payhook-sender/${VERSION} (listen)`,
      };
      try {
        await tail.begin();
        await send(raw, {
          event: 'ready',
          data: {
            listener_id: listenerId,
            business_id: businessId,
            mode,
            events: types ?? null,
            resume_window_seconds: LISTEN_RESUME_WINDOW_SECONDS,
            ...(resume
              ? { resumed: resume.resumed, ...(resume.reason ? { reason: resume.reason } : {}) }
              : {}),
          },
        });
        while (!closed) {
          let events: TailedEvent[];
          try {
            events = await tail.next(PAGE);
          } catch (error) {
            // An outage is logged once by the database's health; the stream waits it out.
            if (!isConnectionLost(error))
              request.log.warn({ err: error, listenerId }, 'listen: reading events failed; trying again');
            events = [];
          }
          for (const event of events) {
            if (closed) break;
            const deliveryId = randomUUID();
            const signature = await keyring.sign({ businessId, mode }, event.id, event.payload);
            await send(raw, {
              event: 'webhook',
              id: event.id,
              data: {
                delivery_id: deliveryId,
                event_id: event.id,
                type: event.type,
                destination: cliDestination(listenerId),
                headers: {
                  ...headers,
                  ...signature,
                  'payhook-event-id': event.id,
                  'payhook-delivery-id': deliveryId,
                  'payhook-attempt': '1',
                },
                body: event.payload,
              },
            });
          }
          if (events.length < PAGE && !closed) {
            await new Promise<void>((resolve) => {
              wake = resolve;
              setTimeout(resolve, POLL_MS).unref();
            });
            wake = undefined;
          }
        }
      } catch (error) {
        // Signing needs the business's secrets: with the database away, the stream ends and the
        // listener resumes after its last event (Last-Event-ID) once it is back.
        if (!isConnectionLost(error)) request.log.warn({ err: error, listenerId }, 'listen: stream ended');
      } finally {
        clearInterval(keepalive);
        open.delete(raw);
        const left = (listeners.get(owner) ?? 1) - 1;
        if (left > 0) listeners.set(owner, left);
        else listeners.delete(owner);
        if (!raw.writableEnded) raw.end();
      }
    },
  );

  app.post<{ Body: ListenerAttemptsReport }>(
    '/listen/attempts',
    {
      schema: {
        summary: 'Record what a listener did with the events it was sent',
        description:
          'Each attempt becomes a finished delivery of the event to `cli:<listener_id>` (delivered on a 2xx local answer, failed otherwise), with one attempt, shown by GET /events/{id}. A delivery id already recorded is skipped. Such deliveries never make an event `failed` and are not redelivered.',
        operationId: 'recordListenerAttempts',
        body: AttemptsBody,
        response: {
          200: Type.Object({
            data: Type.Object({
              recorded: Type.Integer({
                description: 'Attempts recorded now (not before, and of this business).',
              }),
            }),
          }),
        },
      },
    },
    async (request, reply) => {
      const { businessId, mode } = request.principal;
      // JSON Schema's date-time takes years PostgreSQL does not (year 0): refused here, by field.
      const bad = request.body.attempts.findIndex((a) => {
        const year = new Date(a.started_at).getUTCFullYear();
        return !(year >= 1 && year <= 9999);
      });
      if (bad !== -1) {
        throw new ApiError('validation_failed', 'The request has invalid fields.', {
          details: [
            { field: `attempts[${bad}].started_at`, message: 'must be a time between the years 1 and 9999' },
          ],
        });
      }
      // The response is stored under an Idempotency-Key in the transaction of the write.
      return idempotentWrite(db, request, reply, 200, async (tx) => {
        const written = await recordListenerAttempts(
          tx,
          { businessId, mode },
          request.body.listener_id,
          request.body.attempts.map((a) => ({
            deliveryId: a.delivery_id,
            eventId: a.event_id,
            url: a.url,
            startedAt: new Date(a.started_at),
            latencyMs: a.latency_ms,
            statusCode: a.status_code,
            responseBody: a.response_body,
            error: a.error,
          })),
        );
        return { data: { recorded: written.length } };
      });
    },
  );
};
