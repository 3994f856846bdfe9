import { createHash } from 'node:crypto';
import { crc32, deflateSync } from 'node:zlib';
import type { FastifyPluginAsync } from 'fastify';
import { Type } from 'typebox';
import type { Database } from '../db/database.js';
import { ApiError } from '../errors.js';
import { UUID } from '../ids.js';
import type { Payment } from '../payments/payment.js';
import { isoMicros } from '../timestamps.js';

/** What each capture link of a method stands for (the `method` query of `/sandbox/pay/{id}`). */
const STEPS = {
  etransfer: 'E-transfer gateway',
  wallet: 'Crypto-app checkout',
  'wallet-web': 'Crypto-app payment page',
  '3ds': '3-D Secure check',
} as const;
type Step = keyof typeof STEPS;

// The pages load nothing from elsewhere and run no script; the QR placeholder is the only image.
const PAGE_HEADERS = {
  'content-security-policy':
    "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; base-uri 'none'; form-action 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
};

const escapeHtml = (text: string) =>
  text.replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] as string,
  );

/**
 * A PNG image (1-bit greyscale) of `rows`, a grid of dark (true) and light modules, each `scale`
 * pixels wide, built with zlib alone.
 */
export function pngImage(rows: boolean[][], scale: number): Buffer {
  const height = rows.length * scale;
  const width = (rows[0]?.length ?? 0) * scale;
  const stride = Math.ceil(width / 8);
  const raw = Buffer.alloc(height * (stride + 1)); // each scanline: filter byte 0 (none), then pixels
  for (let y = 0; y < height; y++) {
    const row = rows[Math.floor(y / scale)] as boolean[];
    for (let x = 0; x < width; x++) {
      // Greyscale 1 bit: 1 is white.
      const at = y * (stride + 1) + 1 + (x >> 3);
      if (!row[Math.floor(x / scale)]) raw[at] = (raw[at] as number) | (0x80 >> (x & 7));
    }
  }
  const chunk = (type: string, data: Buffer) => {
    const length = Buffer.alloc(4);
    length.writeUInt32BE(data.length);
    const body = Buffer.concat([Buffer.from(type, 'latin1'), data]);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(body));
    return Buffer.concat([length, body, crc]);
  };
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header.set([1, 0, 0, 0, 0], 8); // bit depth 1, greyscale, deflate, no filter method, no interlace
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', header),
    chunk('IDAT', deflateSync(raw)),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

/**
 * The image behind a wallet capture's `qr_url`: a placeholder, not a scannable QR code (the sandbox
 * has no crypto app to scan it). A 21 x 21 pattern from the SHA-512 of the payment id, inside a
 * 4-module light border, so each payment's image differs; 8 pixels a module.
 */
export function qrPlaceholder(paymentId: string): Buffer {
  const bits = createHash('sha512').update(paymentId).digest();
  const size = 21;
  const border = 4;
  const rows = Array.from({ length: size + 2 * border }, (_, y) =>
    Array.from({ length: size + 2 * border }, (_, x) => {
      const i = (y - border) * size + (x - border);
      const inside = x >= border && y >= border && x < size + border && y < size + border;
      return inside && ((bits[i >> 3] as number) & (1 << (i & 7))) !== 0;
    }),
  );
  return pngImage(rows, 8);
}

/**
 * The sandbox's public pages, which a customer's browser opens from capture links (no API key; they
 * exist for test-mode payments only, a live payment's id is a 404 as an unknown one is):
 * `GET /sandbox/pay/{id}` describes the payment and how the sandbox completes it, and
 * `GET /sandbox/qr/{id}.png` is the image of a wallet capture's `qr_url`.
 */
export const sandboxPages: FastifyPluginAsync<{ database: Database }> = async (app, { database }) => {
  const { db } = database;

  /** The test-mode payment of an id, or 404. */
  const testPayment = async (id: string) => {
    const row = UUID.test(id)
      ? await db
          .selectFrom('payments')
          .select(['id', 'data', 'status', 'method_type', 'expires_at'])
          .where('id', '=', id)
          .where('mode', '=', 'test')
          .executeTakeFirst()
      : undefined;
    if (!row) throw new ApiError('not_found', `No sandbox payment ${JSON.stringify(id)}.`);
    return row;
  };

  app.get<{ Params: { payment_id: string }; Querystring: { method?: Step } }>(
    '/sandbox/pay/:payment_id',
    {
      schema: {
        operationId: 'getSandboxPaymentPage',
        summary: 'Sandbox: the page a capture link opens (public; test-mode payments only)',
        security: [],
        querystring: Type.Object(
          { method: Type.Optional(Type.Union(Object.keys(STEPS).map((k) => Type.Literal(k)))) },
          { additionalProperties: true },
        ),
        response: {
          200: {
            description: 'An HTML page describing the payment',
            content: { 'text/html': { schema: { type: 'string' } } },
          },
        },
      },
    },
    async (request, reply) => {
      const row = await testPayment(request.params.payment_id);
      const payment = row.data as Payment;
      const step = request.query.method;
      const origin = `${request.protocol}://${request.host}`;
      const title = step ? STEPS[step] : 'Sandbox payment';
      const method = row.method_type ?? 'bank_account';
      const qr =
        method === 'wallet'
          ? `<p><img src="/sandbox/qr/${row.id}.png" width="232" height="232" alt="QR code placeholder (not scannable)"></p>`
          : '';
      const complete = `curl -X POST ${escapeHtml(origin)}/sandbox/payment-sessions/${row.id}/complete \\
  -H 'Authorization: Bearer &lt;test key&gt;' -H 'Content-Type: application/json' \\
  -d '{"outcome": "succeeded"}'`;
      const html = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}: payhook sandbox</title>
<style>body{font-family:system-ui,sans-serif;max-width:40rem;margin:2rem auto;padding:0 1rem;line-height:1.5}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.2rem 1rem}dt{font-weight:600}
pre{background:#f3f3f3;padding:.6rem;overflow-x:auto}.note{color:#555}</style>
</head>
<body>
<p class="note">payhook sandbox (test mode): no money moves.</p>
<h1>${escapeHtml(title)}</h1>
<dl>
<dt>Amount</dt><dd>${payment.amount} ${escapeHtml(payment.currency)} (in the smallest unit)</dd>
<dt>Currency</dt><dd>${escapeHtml(payment.currency)}</dd>
<dt>Payment method</dt><dd>${escapeHtml(method)}</dd>
<dt>Description</dt><dd>${escapeHtml(payment.description)}</dd>
<dt>Reference</dt><dd>${escapeHtml(payment.reference)}</dd>
<dt>Status</dt><dd>${escapeHtml(row.status)}</dd>
<dt>Expires</dt><dd>${isoMicros(new Date(row.expires_at))}</dd>
</dl>
${qr}
<p>This page stands in for the customer's side of the payment; nothing on it moves the payment.
The sandbox completion API does, with a test key of the business:</p>
<pre>${complete}</pre>
<p><code>{"outcome": "failed"}</code> fails the payment instead, and
<code>POST /sandbox/payment-sessions/${row.id}/expire</code> lets its session expire now.</p>
</body>
</html>
`;
      reply.type('text/html; charset=utf-8').headers(PAGE_HEADERS);
      return html;
    },
  );

  app.get<{ Params: { file: string } }>(
    '/sandbox/qr/:file',
    {
      schema: {
        operationId: 'getSandboxQrImage',
        summary:
          "Sandbox: the image of a wallet capture's qr_url, {id}.png (public; test-mode payments only)",
        security: [],
        params: Type.Object({ file: Type.String({ description: '{payment id}.png' }) }),
        response: {
          200: {
            description: 'A PNG image (a placeholder, not a scannable code)',
            content: { 'image/png': { schema: { type: 'string', format: 'binary' } } },
          },
        },
      },
    },
    async (request, reply) => {
      const match = /^(.+)\.png$/.exec(request.params.file);
      if (!match) throw new ApiError('not_found', `No route GET ${request.url.split('?')[0]}.`);
      const row = await testPayment(match[1] as string);
      reply.type('image/png').headers(PAGE_HEADERS);
      return qrPlaceholder(row.id);
    },
  );
};
