import type { FastifyPluginAsync } from 'fastify';
import { type Kysely, type SqlBool, sql } from 'kysely';
import { type Static, Type } from 'typebox';
import type { Database } from '../db/database.js';
import type { Mode, Schema } from '../db/schema.js';
import { endpointsTaking } from '../delivery/outbox.js';
import { redeliverEvent, redeliverFailed } from '../delivery/redeliver.js';
import {
  DELIVERY_STATUSES,
  type DeliveryStatus,
  deliveryStatus,
  hasDeliveryFor,
} from '../delivery/sql/event-status.js';
import { isHeld } from '../delivery/sql/held-deliveries.js';
import { ApiError } from '../errors.js';
import { UUID } from '../ids.js';
import { isoMicros } from '../timestamps.js';
import { idempotentWrite } from './idempotency.js';
import { listPage, listSchema, microsColumn, PageQuery } from './pagination.js';

const Timestamp = Type.String({ description: 'ISO 8601 UTC timestamp.' });
const NullableTimestamp = Type.Union([Timestamp, Type.Null()]);

/** An event as the API answers it (also the dashboard's view of one). */
export const EventSummary = Type.Object(
  {
    id: Type.String({ format: 'uuid' }),
    type: Type.String(),
    mode: Type.String(),
    payment_id: Type.Union([Type.String(), Type.Null()]),
    created_at: Timestamp,
    delivery_status: Type.Union(
      DELIVERY_STATUSES.map((s) => Type.Literal(s)),
      {
        description:
          'pending: a delivery is still being tried; failed: a delivery failed for good and was not redelivered; delivered: every delivery succeeded; none: no webhook URL was registered.',
      },
    ),
    payload: Type.Object(
      { event: Type.String(), data: Type.Unknown(), checksum: Type.String() },
      { description: 'The exact body every attempt sends.' },
    ),
  },
  { title: 'Event' },
);

const Attempt = Type.Object(
  {
    attempt: Type.Integer(),
    url: Type.String(),
    started_at: Timestamp,
    latency_ms: Type.Integer(),
    status_code: Type.Union([Type.Integer(), Type.Null()]),
    response_body: Type.Union([Type.String(), Type.Null()], { description: 'The first 4 KiB.' }),
    error: Type.Union([Type.Object({ code: Type.String(), message: Type.String() }), Type.Null()]),
  },
  { title: 'DeliveryAttempt' },
);

/** A delivery with its attempts, in `GET /events/{id}`. */
export const Delivery = Type.Object(
  {
    id: Type.String(),
    url: Type.String(),
    status: Type.Union([Type.Literal('pending'), Type.Literal('delivered'), Type.Literal('failed')]),
    attempt_count: Type.Integer(),
    created_at: Timestamp,
    next_attempt_at: NullableTimestamp,
    finished_at: NullableTimestamp,
    superseded_by: Type.Union([Type.String(), Type.Null()], {
      description: 'The delivery a redelivery made in place of this failed one.',
    }),
    attempts: Type.Array(Attempt),
  },
  { title: 'Delivery' },
);

const EventQuery = Type.Intersect([
  PageQuery,
  Type.Object({
    type: Type.Optional(Type.String({ maxLength: 200 })),
    delivery_status: Type.Optional(Type.Union(DELIVERY_STATUSES.map((s) => Type.Literal(s)))),
    payment_id: Type.Optional(Type.String({ maxLength: 100 })),
    created_after: Type.Optional(
      Type.String({ maxLength: 40, description: 'Events created at or after this time (ISO 8601).' }),
    ),
    created_before: Type.Optional(
      Type.String({ maxLength: 40, description: 'Events created before this time (ISO 8601).' }),
    ),
  }),
]);
type EventQuery = PageQuery & {
  type?: string;
  delivery_status?: DeliveryStatus;
  payment_id?: string;
  created_after?: string;
  created_before?: string;
};

// A route that takes no body: an empty JSON object (or none at all) is accepted.
const NoBody = Type.Union([Type.Object({}, { additionalProperties: true }), Type.Null()]);

const RedeliverSince = Type.Object(
  {
    since: Type.String({ description: 'Events created at or after this time (ISO 8601).' }),
    until: Type.Optional(Type.String({ description: 'Events created before this time (default: now).' })),
  },
  { additionalProperties: true, title: 'RedeliverSince' },
);

interface EventRow {
  id: string;
  type: string;
  mode: string;
  payment_id: string | null;
  payload: string;
  micros: string;
  created_at: Date;
  delivery_status: DeliveryStatus;
}

const iso = (date: Date | string | null) => (date === null ? null : isoMicros(date));

function toEvent(row: EventRow) {
  return {
    id: row.id,
    type: row.type,
    mode: row.mode,
    payment_id: row.payment_id,
    created_at: isoMicros(row.created_at),
    delivery_status: row.delivery_status,
    payload: JSON.parse(row.payload) as { event: string; data: unknown; checksum: string },
  };
}

function readTime(value: string, field: string): Date {
  const time = /^\d{4}-\d{2}-\d{2}T/.test(value) ? new Date(value) : new Date(Number.NaN);
  // Year 0 parses in JavaScript but not in PostgreSQL: refused here rather than failed on there.
  if (Number.isNaN(time.getTime()) || time.getUTCFullYear() < 1) {
    throw new ApiError('validation_failed', 'The request has invalid fields.', {
      details: [{ field, message: 'must be an ISO 8601 timestamp, such as 2026-01-31T12:00:00Z' }],
    });
  }
  return time;
}

function selectEvents(db: Kysely<Schema>, businessId: string, mode: Mode) {
  return db
    .selectFrom('events')
    .select([
      'id',
      'type',
      'mode',
      'payment_id',
      'payload',
      'created_at',
      microsColumn.as('micros'),
      deliveryStatus.as('delivery_status'),
    ])
    .where('business_id', '=', businessId)
    .where('mode', '=', mode);
}

/**
 * The events a business's payments produced and their deliveries: `GET /events` (filters: type,
 * delivery status, payment, creation time; newest first, cursor pagination), `GET /events/{id}` with every
 * delivery and attempt, `POST /events/{id}/redeliver` (a new delivery, with its own 48 hours, to
 * each registered URL) and `POST /events/redeliver` (every failed delivery of the events since a
 * time, once: a redelivered failure is not picked again).
 */
export const eventRoutes: FastifyPluginAsync<{ database: Database; retentionDays?: number | null }> = async (
  app,
  { database, retentionDays = null },
) => {
  const db = database.db;
  /** An event of this business and mode, or 404 (saying how long events are kept). */
  const findEvent = (tx: Kysely<Schema>, id: string, businessId: string, mode: Mode, lock = false) =>
    lookUpEvent(tx, id, businessId, mode, lock, retentionDays);

  app.get<{ Querystring: EventQuery }>(
    '/events',
    { schema: listSchema('List events', 'listEvents', EventSummary, EventQuery) },
    async (request) => {
      const { businessId, mode } = request.principal;
      const { type, delivery_status: status, payment_id: paymentId } = request.query;
      const after = request.query.created_after;
      const before = request.query.created_before;
      const createdAfter = after === undefined ? undefined : readTime(after, 'created_after');
      const createdBefore = before === undefined ? undefined : readTime(before, 'created_before');
      if (paymentId !== undefined && !UUID.test(paymentId)) {
        throw new ApiError('invalid_request', '"payment_id" is not a payment id.', {
          details: [{ field: 'payment_id', message: 'must be a UUID' }],
        });
      }
      let list = selectEvents(db, businessId, mode);
      if (type !== undefined) list = list.where('type', '=', type);
      if (paymentId !== undefined) list = list.where('payment_id', '=', paymentId);
      if (createdAfter !== undefined) list = list.where('created_at', '>=', createdAfter);
      if (createdBefore !== undefined) list = list.where('created_at', '<', createdBefore);
      const candidates = status === undefined ? undefined : hasDeliveryFor(status, businessId, mode);
      if (candidates !== undefined) list = list.where(candidates);
      if (status !== undefined) list = list.where(sql<SqlBool>`${deliveryStatus} = ${status}`);
      const { rows, pagination } = await listPage(request.query, list);
      return { data: rows.map(toEvent), pagination };
    },
  );

  app.get<{ Params: { id: string } }>(
    '/events/:id',
    {
      schema: {
        summary: 'Get an event, with its deliveries and their attempts',
        operationId: 'getEvent',
        response: {
          200: Type.Object({
            data: Type.Intersect([EventSummary, Type.Object({ deliveries: Type.Array(Delivery) })]),
          }),
        },
      },
    },
    async (request) => {
      const { businessId, mode } = request.principal;
      const event = await findEvent(db, request.params.id, businessId, mode);
      const deliveries = await db
        .selectFrom('deliveries')
        .selectAll()
        .where('event_id', '=', event.id)
        .orderBy('created_at')
        .orderBy('id')
        .execute();
      const attempts =
        deliveries.length === 0
          ? []
          : await db
              .selectFrom('delivery_attempts')
              .selectAll()
              .where(
                'delivery_id',
                'in',
                deliveries.map((d) => d.id),
              )
              .orderBy('attempt')
              .execute();
      return {
        data: {
          ...toEvent(event),
          deliveries: deliveries.map((d) => ({
            id: d.id,
            url: d.url,
            status: d.status,
            attempt_count: d.attempts,
            created_at: isoMicros(d.created_at),
            // A delivery held while its endpoint is disabled has no next attempt to promise.
            next_attempt_at:
              d.status === 'pending' && !isHeld(d.next_attempt_at) ? iso(d.next_attempt_at) : null,
            finished_at: iso(d.finished_at),
            superseded_by: d.superseded_by,
            attempts: attempts
              .filter((a) => a.delivery_id === d.id)
              .map((a) => ({
                attempt: a.attempt,
                url: a.url,
                started_at: isoMicros(a.started_at),
                latency_ms: a.latency_ms,
                status_code: a.status_code,
                response_body: a.response_body,
                error: a.error_code === null ? null : { code: a.error_code, message: a.error_message ?? '' },
              })),
          })),
        },
      };
    },
  );

  app.post<{ Params: { id: string } }>(
    '/events/:id/redeliver',
    {
      schema: {
        summary: 'Redeliver an event to every enabled endpoint that takes it',
        operationId: 'redeliverEvent',
        // No body is needed; an empty JSON object or none at all is accepted, anything else is 400.
        body: NoBody,
        response: {
          202: Type.Object({
            data: Type.Object({
              event_id: Type.String(),
              deliveries: Type.Array(Type.Object({ id: Type.String(), url: Type.String() })),
            }),
          }),
        },
      },
    },
    async (request, reply) => {
      const { businessId, mode } = request.principal;
      // Stored with the deliveries: a retry after a crash past the commit replays them, rather than
      // making a second set.
      return idempotentWrite(db, request, reply, 202, async (tx) => {
        // Held (key share) until the commit: a retention pass skips it, or had removed it first.
        const event = await findEvent(tx, request.params.id, businessId, mode, true);
        // The endpoints that take this event now (enabled, their filter naming its type).
        const endpoints = await endpointsTaking(tx, businessId, mode, event.type);
        if (endpoints.length === 0) {
          throw new ApiError(
            'no_webhook_urls',
            'No enabled webhook endpoint takes this event: add one (POST /webhook-endpoints, or PATCH /accounts/settings), then redeliver.',
          );
        }
        const ids = await redeliverEvent(tx, event.id, endpoints);
        return {
          data: {
            event_id: event.id,
            deliveries: endpoints.map(({ url }, i) => ({ id: ids[i] as string, url })),
          },
        };
      });
    },
  );

  app.post<{ Body: Static<typeof RedeliverSince> }>(
    '/events/redeliver',
    {
      schema: {
        summary: 'Redeliver every failed delivery since a time',
        operationId: 'redeliverFailed',
        description:
          'Only deliveries whose status is failed (every attempt over 48 hours refused) are sent again, each as a new delivery with its own 48 hours; delivered and pending deliveries are left alone. Answers how many were redelivered.',
        body: RedeliverSince,
        response: { 202: Type.Object({ data: Type.Object({ redelivered: Type.Integer() }) }) },
      },
    },
    async (request, reply) => {
      const { businessId, mode } = request.principal;
      const since = readTime(request.body.since, 'since');
      const until = request.body.until === undefined ? new Date() : readTime(request.body.until, 'until');
      return idempotentWrite(db, request, reply, 202, async (tx) => ({
        data: { redelivered: await redeliverFailed(tx, { businessId, mode, since, until }) },
      }));
    },
  );
};

/**
 * An event of this business and mode (with `lock`, held until the transaction ends, so that no
 * retention pass removes it meanwhile), or 404; the 404 of an event id says how long events are kept.
 */
async function lookUpEvent(
  db: Kysely<Schema>,
  id: string,
  businessId: string,
  mode: Mode,
  lock: boolean,
  retentionDays: number | null,
): Promise<EventRow> {
  if (!UUID.test(id)) throw new ApiError('not_found', `No event ${JSON.stringify(id)}.`);
  const query = selectEvents(db, businessId, mode).where('id', '=', id);
  const row = await (lock ? query.forKeyShare() : query).executeTakeFirst();
  if (!row) {
    throw new ApiError(
      'not_found',
      retentionDays === null
        ? `No event ${JSON.stringify(id)}.`
        : `No event ${JSON.stringify(id)}. Events are kept ${retentionDays} days (PAYHOOK_RETENTION_DAYS): an older one may have been removed by retention.`,
    );
  }
  return row;
}
