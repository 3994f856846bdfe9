// payhook at work, in one process and on nothing but Node: an Express receiver verifies signed
// payment events, acknowledges each with 200 at once, refuses forgeries, and handles every event
// exactly once. Exits 0 only if every outcome is the expected one.
import { createHmac } from 'node:crypto';
import { createReceiver, explainChecksumMismatch, formatMismatch } from '@payhook/core';
import { createTestEvent } from '@payhook/core/testing';
import { payhook } from '@payhook/express';
import express from 'express';

const BUSINESS_ID = '3f6c2a8e-91d4-4b7a-a0c5-7e2d9b1f4c36';
const tty = process.stdout.isTTY;
const paint = (code, s) => (tty ? `\x1b[${code}m${s}\x1b[0m` : s);
const green = (s) => paint(32, s);
const red = (s) => paint(31, s);
const dim = (s) => paint(2, s);

const receiver = createReceiver({
  businessIds: [BUSINESS_ID],
  allowedIps: ['127.0.0.1', '::1'],
  retry: { attempts: 2, minDelayMs: 50 },
});
const handled = new Map();
receiver.onAny((event, { key }) => {
  handled.set(key, (handled.get(key) ?? 0) + 1);
  console.log(
    dim(`    handler: ${event.event} for payment ${event.data?.id ?? '?'} (${event.data?.status ?? '-'})`),
  );
});
receiver.onUnrecognized(({ event, reason }) =>
  console.log(dim(`    onUnrecognized: ${event.event} (${reason})`)),
);

const app = express();
app.use('/webhooks', payhook(receiver));
const server = app.listen(0, '127.0.0.1');
await new Promise((resolve) => server.once('listening', resolve));
const url = `http://127.0.0.1:${server.address().port}/webhooks/`;
console.log(`Receiver listening at ${url} (business ${BUSINESS_ID})\n`);

const post = async (body) => {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  return { status: res.status, body: await res.json() };
};

const created = JSON.stringify(
  createTestEvent('payment.session.created', BUSINESS_ID, { method: 'bank_account' }),
);
const succeeded = JSON.stringify(
  createTestEvent('payment.session.succeeded', BUSINESS_ID, { method: 'card' }),
);
const failed = JSON.stringify(
  createTestEvent('payment.session.failed', BUSINESS_ID, { method: 'crypto_address' }),
);
const tampered = succeeded.replace(/"amount":\d+/, '"amount":1');
// A sender in another language (PHP's json_encode escapes "/" and non-ASCII) signs its own bytes.
const phpData = '{"description":"Caf\\u00e9 order \\/ 42","id":"6a1f0c2e-5b7d-4e3a-9c8b-2d4f6a8e0b1c"}';
const phpChecksum = createHmac('sha256', BUSINESS_ID)
  .update(`payment.refund.created|${phpData}`)
  .digest('hex');
const php = `{"event":"payment.refund.created","data":${phpData},"checksum":"${phpChecksum}"}`;

const steps = [
  ['payment.session.created (bank transfer)', created, 200],
  ['payment.session.succeeded (card)', succeeded, 200],
  ['the same event again (a retry)', succeeded, 200, true],
  ['payment.session.failed (stablecoin)', failed, 200],
  ['an unknown event signed by a PHP sender', php, 200],
  ['a tampered amount', tampered, 401],
  ['not JSON', '{"event":', 400],
];

let ok = true;
for (const [label, body, expected, duplicate] of steps) {
  const res = await post(body);
  const pass = res.status === expected && (duplicate === undefined || res.body.duplicate === true);
  ok &&= pass;
  const detail = res.body.error
    ? `${res.body.error.code}`
    : res.body.duplicate
      ? 'duplicate, not processed again'
      : 'received';
  console.log(`${pass ? green('✓') : red('✗')} ${label}: ${res.status} ${detail}`);
  await receiver.idle();
  if (res.status === 401) {
    const explanation = explainChecksumMismatch({ rawBody: body }, { businessIds: [BUSINESS_ID] });
    const lines = formatMismatch(explanation)
      .split('\n')
      .filter((l) => l && !l.startsWith('Hints'));
    console.log(
      dim(
        lines
          .slice(0, 7)
          .map((l) => `    ${l.length > 110 ? `${l.slice(0, 110)}…` : l}`)
          .join('\n'),
      ),
    );
  }
}

await receiver.close();
server.close();
const counts = [...handled.values()];
const once = counts.length === 4 && counts.every((n) => n === 1);
console.log(`\n${handled.size} events handled, ${once ? 'each exactly once' : red('NOT exactly once')}.`);
process.exit(ok && once ? 0 : 1);
