/**
 * pnpm bench:verify — the cost of verifying one webhook, payhook beside its peers, in one run.
 *
 * For payment payloads of about 1 KB, 10 KB and 100 KB it measures:
 * - floor: JSON.parse + HMAC-SHA256 over the raw body (what any verifier must at least do);
 * - payhook verifyChecksum, auto on the raw body, as the sender encodes it (RFC 8785 key order)
 *   and as a sender with another key order and whitespace would;
 * - payhook verifyChecksum, jcs on an already parsed payload (a body parser ran first);
 * - naive: JSON.parse + the `canonicalize` package + HMAC, on each of the two raw bodies;
 * - payhook's Standard Webhooks signature alone, and checksum + signature (what a receiver with
 *   `signingSecrets` does), on the sender's raw body;
 * - stripe.webhooks.constructEvent, standardwebhooks Webhook.verify, @octokit/webhooks-methods verify.
 * Then, on Node, Bun and Deno each (bench/verify-runtime.mjs in a child process of that runtime):
 * payhook's checksum and signature on its Web path (where node:crypto is missing: a JavaScript HMAC
 * up to 12 KB, Web Crypto above), on its default path, and standardwebhooks' verify, side by side
 * on the same runtime.
 *
 * Targets: every checksum row at least 2x the naive verify of the same body (the row "other order +
 * spaces" against the naive verify of that body, the others against the sender's encoding), as the
 * median ratio of alternating rounds of the two (this machine's speed drifts between rows);
 * checksum + signature costs at most 1.3x the checksum alone and is at least 1x the standardwebhooks
 * package's verify. Each row's verdict is printed, and the JSON keeps every row's ops/s and ratios.
 * On each runtime, the target is checksum + signature on the Web path at least 1x standardwebhooks
 * at 1 KB and 100 KB (printed; the rows are in the JSON).
 *
 * `pnpm bench:verify --runtimes` measures the runtime rows alone and puts them, dated, into the
 * results already written, whose Node rows stay as they were: for a change to the Web path only.
 */
import { execFileSync } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sign as octokitSign, verify as octokitVerify } from '@octokit/webhooks-methods';
import {
  computeChecksum,
  encodeSignedEvent,
  parseSigningSecret,
  readSignatureHeaders,
  signWebhook,
  verifyChecksum,
  verifyWebhookSignature,
} from '@payhook/core';
import { createTestPayment } from '@payhook/core/testing';
import canonicalize from 'canonicalize';
import { Webhook } from 'standardwebhooks';
import Stripe from 'stripe';
import { fmt, opsPerSecond, pairedRatio, printTable, writeResults } from './lib.js';

const BIZ = '5b1e1f0a-0c3d-4a8e-9e51-3f0d2c6a7b19';
const EVENT = 'payment.session.succeeded';
const stripe = new Stripe('sk_test_bench');
const STRIPE_SECRET = 'whsec_bench_secret';
const swh = new Webhook(Buffer.from('bench-secret-for-standard-webhooks').toString('base64'));

/** A realistic payment whose order grows until its JSON is about `bytes` long. */
function paymentOfSize(bytes: number): Record<string, unknown> {
  const payment = createTestPayment({ method: 'card', status: 'settled' }) as unknown as Record<
    string,
    unknown
  >;
  const order = (payment.metadata as { order: { items: unknown[] } }).order;
  const template = order.items;
  let i = 0;
  while (JSON.stringify({ event: EVENT, data: payment, checksum: 'x'.repeat(64) }).length < bytes) {
    order.items.push({
      ...(template[i % template.length] as object),
      sku: `SKU-${100000 + i}`,
      quantity: (i % 5) + 1,
    });
    i++;
  }
  return payment;
}

/** The same value with keys in reverse order and two-space indentation. */
function reordered(value: unknown): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map(reordered);
  return Object.fromEntries(
    Object.keys(value)
      .sort()
      .reverse()
      .map((k) => [k, reordered((value as Record<string, unknown>)[k])]),
  );
}

const SIGNING_KEY = parseSigningSecret(
  `whsec_${Buffer.from('bench-secret-for-standard-webhooks').toString('base64')}`,
);

const NAIVE = 'naive: parse + canonicalize + HMAC';
const CHECKSUM = 'payhook auto, raw (sender order)';
const BOTH = 'payhook checksum + signature';
const SWH = 'standardwebhooks verify';
const NAIVE_LOOSE = 'naive (other order + spaces)';
/** Each payhook row, and the naive row it is measured against (the same body). */
const TARGETS: Record<string, string> = {
  [CHECKSUM]: NAIVE,
  'payhook auto, raw (other order + spaces)': NAIVE_LOOSE,
  'payhook jcs, parsed payload': NAIVE,
};

/** The naive verify: JSON.parse, the `canonicalize` package on data without checksum, HMAC. */
function naiveVerify(body: string): boolean {
  const parsed = JSON.parse(body);
  const { checksum: _c, ...rest } = parsed.data;
  return (
    createHmac('sha256', BIZ)
      .update(`${parsed.event}|${canonicalize(rest)}`)
      .digest('hex') === parsed.checksum
  );
}

const rows: string[][] = [];
const json: Record<
  string,
  Record<string, { opsPerSec: number; xFloor: number; xStripe: number; xNaive: number; target?: string }>
> = {};
const failures: string[] = [];
const runtimesOnly = process.argv.includes('--runtimes');

for (const size of runtimesOnly ? [] : [1_000, 10_000, 100_000]) {
  const data = paymentOfSize(size);
  const checksum = computeChecksum(EVENT, data, BIZ);
  // What the reference sender puts on the wire: data in RFC 8785 order.
  const raw = encodeSignedEvent(EVENT, data, BIZ);
  const rawLoose = JSON.stringify({ event: EVENT, data: reordered(data), checksum }, null, 2);
  const rawBuf = Buffer.from(raw);
  const parsed = JSON.parse(raw);
  const options = { businessIds: [BIZ] };
  for (const [name, body] of [
    ['canonical', raw],
    ['loose', rawLoose],
  ] as const) {
    if (!verifyChecksum({ rawBody: body }, options).ok)
      throw new Error(`payhook does not verify its ${name} body`);
  }

  const stripeHeader = stripe.webhooks.generateTestHeaderString({ payload: raw, secret: STRIPE_SECRET });
  const swhId = 'msg_bench';
  const swhTs = new Date();
  const swhHeaders = {
    'webhook-id': swhId,
    'webhook-timestamp': String(Math.floor(swhTs.getTime() / 1000)),
    'webhook-signature': swh.sign(swhId, swhTs, raw),
  };
  // The sender's headers for the same body, as a receiver reads them from the request.
  const signed = signWebhook({ id: swhId, body: raw, secrets: [SIGNING_KEY] });
  const received = () => readSignatureHeaders(signed);
  const keys = { secrets: [SIGNING_KEY] };
  if (!verifyWebhookSignature(received(), rawBuf, keys).ok)
    throw new Error('payhook does not verify its signature');
  const octokitSecret = 'octokit-bench-secret';
  const octokitSig = await octokitSign(octokitSecret, raw);

  const tasks: [string, () => unknown][] = [
    [
      'floor: JSON.parse + HMAC(raw)',
      () => {
        JSON.parse(raw);
        return createHmac('sha256', BIZ).update(rawBuf).digest();
      },
    ],
    [CHECKSUM, () => verifyChecksum({ rawBody: rawBuf }, options)],
    ['payhook auto, raw (other order + spaces)', () => verifyChecksum({ rawBody: rawLoose }, options)],
    ['payhook jcs, parsed payload', () => verifyChecksum({ payload: parsed }, options)],
    ['payhook signature alone', () => verifyWebhookSignature(received(), rawBuf, keys)],
    [
      BOTH,
      () =>
        verifyWebhookSignature(received(), rawBuf, keys).ok && verifyChecksum({ rawBody: rawBuf }, options),
    ],
    [NAIVE, () => naiveVerify(raw)],
    [NAIVE_LOOSE, () => naiveVerify(rawLoose)],
    ['stripe constructEvent', () => stripe.webhooks.constructEvent(raw, stripeHeader, STRIPE_SECRET)],
    [SWH, () => swh.verify(raw, swhHeaders)],
    ['@octokit/webhooks-methods verify', () => octokitVerify(octokitSecret, raw, octokitSig)],
  ];

  const results: Record<string, number> = {};
  for (const [name, fn] of tasks) results[name] = await opsPerSecond(fn);
  // The signature's targets are ratios of two rows: measured again in alternating rounds.
  const task = (name: string) => tasks.find(([n]) => n === name)?.[1] as () => unknown;
  const bothVsChecksum = await pairedRatio(task(CHECKSUM), task(BOTH));
  const bothVsSwh = await pairedRatio(task(SWH), task(BOTH));
  // So are the checksum rows' targets: each against the naive verify of its body.
  const paired: Record<string, number> = {};
  for (const [name, naiveName] of Object.entries(TARGETS)) {
    paired[name] = await pairedRatio(task(naiveName), task(name));
  }
  const floor = results['floor: JSON.parse + HMAC(raw)'] as number;
  const stripeOps = results['stripe constructEvent'] as number;
  const label = `${Math.round(raw.length / 1000)} KB`;
  json[label] = {};
  for (const [name, ops] of Object.entries(results)) {
    const naiveName = TARGETS[name] ?? NAIVE;
    const xNaive = ops / (results[naiveName] as number);
    let verdict = '';
    if (name === BOTH) {
      const met = 1 / bothVsChecksum <= 1.3 && bothVsSwh >= 1;
      verdict = `${met ? 'met' : 'MISSED'} (${(1 / bothVsChecksum).toFixed(2)}x the checksum's cost, ${bothVsSwh.toFixed(2)}x standardwebhooks; paired)`;
      if (!met) failures.push(`${label}: ${name}: ${verdict}`);
    } else if (TARGETS[name] !== undefined) {
      const ratio = paired[name] as number;
      const met = ratio >= 2;
      verdict = `${met ? 'met' : 'MISSED'} (${ratio.toFixed(2)}x ${naiveName === NAIVE ? 'naive' : 'naive, same body'}; paired, target 2x)`;
      if (!met) failures.push(`${label}: ${name} is ${ratio.toFixed(2)}x ${naiveName} (paired; target 2x)`);
    }
    rows.push([
      label,
      name,
      fmt(ops),
      (ops / floor).toFixed(2),
      (ops / stripeOps).toFixed(2),
      xNaive.toFixed(2),
      verdict,
    ]);
    json[label][name] = {
      opsPerSec: Math.round(ops),
      xFloor: round2(ops / floor),
      xStripe: round2(ops / stripeOps),
      xNaive: round2(xNaive),
      ...(verdict ? { target: verdict } : {}),
    };
  }
}

/** One runtime's rows from bench/verify-runtime.mjs: ops/s by body size, then by verifier. */
interface RuntimeRun {
  runtime: string;
  version: string;
  results: Record<string, Record<string, number>>;
  /** When it ran (the runtime rows may be newer than the Node rows). */
  date?: string;
}
const WEB_BOTH = 'payhook checksum + signature, Web path';

// Each runtime runs the same script in bench/, where its packages resolve from node_modules (Deno
// reads them there too, next to bench/package.json); Deno with a fresh DENO_DIR and nothing fetched.
const benchDir = fileURLToPath(new URL('./', import.meta.url));
const bin = (name: string) => fileURLToPath(new URL(`../node_modules/.bin/${name}`, import.meta.url));
const denoDir = mkdtempSync(join(tmpdir(), 'payhook-bench-deno-'));
const runtimeCommands: [string, string, string[]][] = [
  ['node', process.execPath, ['verify-runtime.mjs']],
  ['bun', bin('bun'), ['verify-runtime.mjs']],
  ['deno', bin('deno'), ['run', '--allow-read', '--allow-env', '--no-prompt', 'verify-runtime.mjs']],
];
const runtimes: Record<string, RuntimeRun> = {};
const runtimeRows: string[][] = [];
try {
  for (const [name, command, args] of runtimeCommands) {
    const out = execFileSync(command, args, {
      cwd: benchDir,
      env: { ...process.env, DENO_DIR: denoDir, DENO_NO_UPDATE_CHECK: '1' },
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const run = JSON.parse(out.trim().split('\n').at(-1) as string) as RuntimeRun;
    runtimes[name] = { ...run, date: new Date().toISOString() };
    for (const size of ['1 KB', '100 KB']) {
      const ratio = (run.results[size]?.[WEB_BOTH] as number) / (run.results[size]?.[SWH] as number);
      if (!(ratio >= 1))
        failures.push(`${name} ${size}: ${WEB_BOTH} is ${ratio.toFixed(2)}x ${SWH} (target 1x)`);
    }
    for (const [size, verifiers] of Object.entries(run.results)) {
      const swhOps = verifiers[SWH] as number;
      for (const [verifier, ops] of Object.entries(verifiers)) {
        runtimeRows.push([
          `${run.runtime} ${run.version}`,
          size,
          verifier,
          fmt(ops),
          (ops / swhOps).toFixed(2),
        ]);
      }
    }
  }
} finally {
  rmSync(denoDir, { recursive: true, force: true });
}

function round2(n: number): number {
  return Math.round(n * 100) / 100;
}

/** The runtime rows put into the results already written (`--runtimes`), the Node rows kept. */
function replaceRuntimes(): string {
  const dir = process.env.BENCH_RESULTS_DIR ?? fileURLToPath(new URL('./results/', import.meta.url));
  const file = join(dir, 'verify.json');
  const written = JSON.parse(readFileSync(file, 'utf8')) as { results: Record<string, unknown> };
  written.results.runtimes = runtimes;
  writeFileSync(file, `${JSON.stringify(written, null, 2)}\n`);
  return file;
}

if (!runtimesOnly)
  printTable(['size', 'verifier', 'ops/s', 'x floor', 'x stripe', 'x naive', 'target'], rows);
console.log('\nOn each runtime (x standardwebhooks: against its verify on the same runtime and body):\n');
printTable(['runtime', 'size', 'verifier', 'ops/s', 'x standardwebhooks'], runtimeRows);
const written = runtimesOnly ? replaceRuntimes() : writeResults('verify', { ...json, runtimes });
console.log(`\nresults written to ${written.replace(process.cwd(), '.')}`);
console.log(
  failures.length > 0
    ? `\nbelow target:\n${failures.join('\n')}`
    : '\nevery target met: each checksum row 2x the naive verify of its body; checksum + signature within 1.3x the checksum and at least 1x standardwebhooks, on the Web path too',
);
