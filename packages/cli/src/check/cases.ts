import { randomUUID } from 'node:crypto';
import {
  encodeSignedEvent,
  generateSigningSecret,
  parseSigningSecret,
  type SigningKey,
  signWebhook,
} from '@payhook/core';
import { createTestPayment } from '@payhook/core/testing';

/** What a correct receiver answers: 200 (the only status the sender counts as delivered), or a 4xx refusal. */
export type Expected = 'accept' | 'refuse';

/** One request of the self-test, and what a correct receiver does with it. */
export interface CheckCase {
  name: string;
  expected: Expected;
  /** What it means when a receiver answers otherwise. */
  wrong: string;
  body: string;
  headers: Record<string, string>;
}

/** What the cases are made for: the receiver's business id and, once it has them, its signing secrets. */
export interface CaseOptions {
  businessId: string;
  secrets: readonly SigningKey[];
}

const EVENT = 'payment.session.succeeded';

/** A fresh event (a new payment) in the sender's bytes: `{"event","data","checksum"}`, data in RFC 8785 form. */
const freshEvent = (businessId: string, description?: string, event: string = EVENT) =>
  encodeSignedEvent(
    event,
    createTestPayment({ status: 'settled', ...(description ? { description } : {}) }),
    businessId,
  );

/**
 * The same JSON with every object's keys in reverse order, a space after each `:` and `,`, and
 * every `/` in a string escaped as `\/`: other bytes, the same value (a receiver must verify the
 * canonical form, not the bytes).
 */
export function reorderedJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(reorderedJson).join(', ')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value).reverse();
    return `{${entries.map(([k, v]) => `${reorderedJson(k)}: ${reorderedJson(v)}`).join(', ')}}`;
  }
  return typeof value === 'string' ? JSON.stringify(value).replaceAll('/', '\\/') : JSON.stringify(value);
}

/**
 * The cases `payhook check` sends, in order. Every body but the duplicate's is a fresh event (a
 * new payment), so that a receiver's idempotency never answers for it. With secrets, every request
 * but the signature cases is signed with the first, including the forgeries: only the checksum can
 * refuse those, as it must.
 */
export function checkCases({ businessId, secrets }: CaseOptions): CheckCase[] {
  const signed = (body: string, id = randomUUID(), timestamp?: number): Record<string, string> =>
    secrets.length > 0 ? { ...signWebhook({ id, body, secrets: [...secrets], timestamp }) } : {};
  const make = (c: Omit<CheckCase, 'headers'> & { headers?: Record<string, string> }): CheckCase => ({
    ...c,
    headers: c.headers ?? signed(c.body),
  });

  const valid = freshEvent(businessId);
  const validId = randomUUID();
  // The sender's bytes with one thing changed: the checksum, or the amount after signing.
  const forged = freshEvent(businessId).replace(
    /"checksum":"[0-9a-f]{64}"/,
    `"checksum":"${'0f'.repeat(32)}"`,
  );
  const tampered = freshEvent(businessId).replace(
    /"amount":(\d+)/,
    (_, amount: string) => `"amount":${Number(amount) + 1}`,
  );

  const cases: CheckCase[] = [
    make({
      name: 'valid event',
      expected: 'accept',
      wrong: 'the receiver refused an authentic event',
      body: valid,
      headers: signed(valid, validId),
    }),
    make({
      name: 'duplicate delivery',
      expected: 'accept',
      wrong:
        'a retry of an event already received must be acknowledged (200), or the sender retries it for 48 hours',
      body: valid,
      // A retry: the same webhook-id and bytes, signed again at its attempt.
      headers: signed(valid, validId),
    }),
    make({
      name: 'forged checksum',
      expected: 'refuse',
      wrong: 'the receiver accepted an event whose checksum is wrong',
      body: forged,
    }),
    make({
      name: 'checksum of another business',
      expected: 'refuse',
      wrong: "the receiver accepted a checksum made with another business's id",
      body: freshEvent(`${businessId}-other`),
    }),
    make({
      name: 'tampered field',
      expected: 'refuse',
      wrong: 'the receiver accepted an event whose amount was changed after it was signed',
      body: tampered,
    }),
    make({
      name: 'other key order, spaces, \\/',
      expected: 'accept',
      wrong:
        'the receiver refused an authentic event written differently: verify the checksum over the canonical (key-sorted) JSON of the parsed data, not the raw bytes',
      body: reorderedJson(JSON.parse(freshEvent(businessId, 'Order 1/2, see https://shop.example/orders/1'))),
    }),
    make({
      name: 'unknown event type',
      expected: 'accept',
      wrong:
        'an authentic event of a type the receiver does not know must be acknowledged (200): the service adds events',
      body: freshEvent(businessId, undefined, 'payment.refund.created'),
    }),
    make({
      name: 'malformed JSON',
      expected: 'refuse',
      wrong: 'a body that is not JSON must be refused with a 4xx (a 5xx makes the sender retry it)',
      body: valid.slice(0, Math.floor(valid.length / 2)),
    }),
  ];
  if (secrets.length === 0) return cases;

  const stale = freshEvent(businessId);
  const other = freshEvent(businessId);
  const unsigned = freshEvent(businessId);
  const otherSecret = parseSigningSecret(generateSigningSecret());
  return [
    ...cases,
    make({
      name: 'stale signature (10 min)',
      expected: 'refuse',
      wrong:
        'the receiver accepted a signature 10 minutes old: check webhook-timestamp (5 minutes either way)',
      body: stale,
      headers: signed(stale, randomUUID(), Math.floor(Date.now() / 1000) - 600),
    }),
    make({
      name: 'signature with another secret',
      expected: 'refuse',
      wrong: 'the receiver accepted a signature made with a secret it was not given',
      body: other,
      headers: { ...signWebhook({ id: randomUUID(), body: other, secrets: [otherSecret] }) },
    }),
    make({
      name: 'missing signature',
      expected: 'refuse',
      wrong:
        'the receiver accepted an event without signature headers: once it has a secret, it must require them (a payhook receiver with signingSecrets does, unless allowUnsigned: true)',
      body: unsigned,
      headers: {},
    }),
  ];
}
