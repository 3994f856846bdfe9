import { type RawBuilder, type SqlBool, sql } from 'kysely';

/**
 * Where a delivery goes: a webhook URL, or a `payhook listen` listener. A listener's deliveries are
 * recorded under `cli:` and the listener's id, written finished (the worker never claims one), and
 * they never count: bulk redelivery skips them, and an event's `delivery_status` reads only the
 * deliveries to webhook URLs. This module is the one place that rule is written, in JavaScript and
 * in SQL.
 */
export const CLI_DESTINATION_PREFIX = 'cli:';

// The rule in SQL is a LIKE on the prefix, which reads as `startsWith` only while the prefix holds
// none of LIKE's wildcards or its escape (a unit test keeps it so).
const LISTENER_PATTERN = `${CLI_DESTINATION_PREFIX}%`;

/** A listener's destination: `cli:<listener id>`. */
export const cliDestination = (listenerId: string): string => `${CLI_DESTINATION_PREFIX}${listenerId}`;

/** Whether a delivery's `url` is a listener's (`cli:<id>`) rather than a webhook URL. */
export const isListenerDestination = (url: string): boolean => url.startsWith(CLI_DESTINATION_PREFIX);

/**
 * The SQL condition "this delivery went to a webhook URL, not to a listener" on a `url` column
 * (`'d.url'`), the negation of {@link isListenerDestination}.
 *
 * @example
 * ```ts
 * db.selectFrom('deliveries as d').selectAll().where(isWebhookUrl('d.url'));
 * ```
 */
export function isWebhookUrl(column: string): RawBuilder<SqlBool> {
  return sql<SqlBool>`${sql.ref(column)} not like ${LISTENER_PATTERN}`;
}
