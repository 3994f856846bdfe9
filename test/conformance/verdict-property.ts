import { Agent, request } from 'node:http';
import { createReceiver, encodeEnvelope, type Receiver, silentLogger } from '@payhook/core';
import canonicalize from 'canonicalize';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  hmacHex,
  type JsonMember,
  type JsonNode,
  jcsText,
  lexicalText,
  readTree,
  referenceVerdict,
  type Verdict,
  writeTree,
} from './verdict-reference.js';

/**
 * The property-based suite run on every adapter: seeded mutations of validly signed bodies (bit
 * flips, truncations, key swaps, duplicate keys, deep nesting, whitespace, number and string
 * forms, checksum and event edits, some signed again after the mutation), each sent over HTTP to
 * a real app, and judged by the independent reference in verdict-reference.ts. Never a 5xx, never
 * a 200 the reference refuses, and the same answer class as the reference.
 *
 * PAYHOOK_PROPERTY_SEED and PAYHOOK_PROPERTY_RUNS override the fixed seed and the number of runs.
 */

/** A running app with the adapter mounted, raw body, at POST /webhooks. */
export interface PropertyApp {
  url: string;
  close(): Promise<void>;
}

/** Starts one app of an adapter around `receiver`. */
export type StartPropertyApp = (receiver: Receiver) => Promise<PropertyApp>;

export const PROPERTY_SEED = Number(process.env.PAYHOOK_PROPERTY_SEED ?? 0x5eed_8785);
export const PROPERTY_RUNS = Number(process.env.PAYHOOK_PROPERTY_RUNS ?? 2000);

/** The receiver's keys: one plain id, and one whose UTF-8 bytes differ from its UTF-16 units. */
const BUSINESS_IDS = ['0b7f3c1e-2a44-4d8e-9a61-5c2f1e7d9b30', 'bïz-ümlaut-€-2'];
/** A key the receiver does not hold: bodies signed with it are forgeries. */
const FOREIGN_ID = 'a9b8c7d6-e5f4-4a3b-8c2d-1e0f9a8b7c6d';

const STATUS_OF: Record<Verdict, number> = { accepted: 200, malformed_payload: 400, invalid_checksum: 401 };

// ---------------------------------------------------------------------------------------------
// Bodies: data, how it is written, how it is signed.

/** A payment as the sender writes it (fields the generator varies are filled in below). */
function payment(amount: number, reference: string, description: string, extra: Record<string, unknown>) {
  return {
    id: 'd3b07384-d9a0-4c4b-8f7e-1c2d3e4f5a6b',
    amount,
    currency: 'NGN',
    status: 'settled',
    reference,
    description,
    customer: { email: 'adaeze@example.com', name: 'Adaeze Okafor', phone: null },
    metadata: { order: { identifier: `ord_${reference}`, items: [{ name: 'Café / Tea', qty: 2 }] } },
    fees: [0.5, 1.25, 100],
    ...extra,
  };
}

const jsonValue = fc.jsonValue({ maxDepth: 2 });

const dataArb: fc.Arbitrary<unknown> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc
      .tuple(
        fc.integer({ min: 0, max: 2 ** 53 - 1 }),
        fc.string({ maxLength: 12 }),
        fc.string({ unit: 'grapheme', maxLength: 12 }),
        fc.dictionary(fc.string({ maxLength: 6 }), jsonValue, { maxKeys: 3 }),
      )
      .map(([amount, reference, description, extra]) => payment(amount, reference, description, extra)),
  },
  {
    weight: 2,
    arbitrary: fc.dictionary(fc.string({ unit: 'binary', maxLength: 6 }), jsonValue, { maxKeys: 6 }),
  },
  { weight: 1, arbitrary: jsonValue },
  // Nesting around the depth limit: data at k levels inside the envelope's one.
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.integer({ min: 58, max: 70 }), fc.boolean())
      .map(([levels, objects]) => nest({ leaf: 1 }, levels - 1, objects)),
  },
);

function nest(value: unknown, levels: number, objects: boolean): unknown {
  let out = value;
  for (let k = 0; k < levels; k++) out = objects ? { k: out } : [out];
  return out;
}

/** How `data` is written in the body, and over which form the sender signed it. */
type Writer = 'jcs' | 'stringify' | 'pretty' | 'php' | 'numbers';

/** PHP's json_encode: "/" and every non-ASCII character escaped, keys as inserted. */
function phpText(value: unknown): string {
  return JSON.stringify(value).replace(/[/\u0080-\uffff]/g, (c) =>
    c === '/' ? '\\/' : `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

/** Every integer token written with a fraction (`1` as `1.0`), as some encoders do. */
function numbersText(value: unknown): string {
  const tree = readTree(JSON.stringify(value), { strict: false });
  const visit = (node: JsonNode) => {
    if (node.kind === 'token' && /^-?\d+$/.test(node.raw)) node.raw = `${node.raw}.0`;
    if (node.kind === 'array') node.items.forEach(visit);
    if (node.kind === 'object') for (const m of node.members) visit(m.value);
  };
  visit(tree);
  return writeTree(tree);
}

function dataText(data: unknown, writer: Writer): string {
  switch (writer) {
    case 'jcs':
      return canonicalize(data) as string;
    case 'stringify':
      return JSON.stringify(data);
    case 'pretty':
      return JSON.stringify(data, null, 2);
    case 'php':
      return phpText(data);
    case 'numbers':
      return numbersText(data);
  }
}

/** Signs `data` written as `text`: over RFC 8785 as the sender does, or over its lexical form. */
function sign(event: string, data: unknown, text: string, writer: Writer, businessId: string): string {
  const signed =
    writer === 'php' || writer === 'numbers'
      ? lexicalText(readTree(text, { strict: false }), true)
      : (jcsText(data) as string);
  return hmacHex(businessId, `${event}|${signed}`);
}

const eventArb = fc.oneof(
  fc.constantFrom('payment.session.created', 'payment.session.succeeded', 'payment.session.failed'),
  fc.string({ unit: 'grapheme', minLength: 1, maxLength: 20 }),
);

const baseArb = fc
  .record({
    event: eventArb,
    data: dataArb,
    writer: fc.constantFrom<Writer>('jcs', 'jcs', 'stringify', 'pretty', 'php', 'numbers'),
    key: fc.oneof(
      { weight: 6, arbitrary: fc.constantFrom(...BUSINESS_IDS) },
      { weight: 1, arbitrary: fc.constant(FOREIGN_ID) },
    ),
    layout: fc.constantFrom('sender', 'reordered', 'spaced', 'extra'),
    upper: fc.boolean(),
  })
  .map(({ event, data, writer, key, layout, upper }) => {
    const text = dataText(data, writer);
    let checksum = sign(event, data, text, writer, key);
    if (upper) checksum = checksum.toUpperCase();
    const e = JSON.stringify(event);
    const c = JSON.stringify(checksum);
    switch (layout) {
      case 'sender':
        return encodeEnvelope(event, text, checksum);
      case 'reordered':
        return `{"checksum":${c},"data":${text},"event":${e}}`;
      case 'spaced':
        return `{ "event" : ${e} ,\n  "data" : ${text} ,\n  "checksum" : ${c} }\n`;
      default:
        return `{"id":"evt_1","event":${e},"attempt":1,"data":${text},"checksum":${c},"meta":{"v":[1,2]}}`;
    }
  });

// ---------------------------------------------------------------------------------------------
// Mutations. Each picks its target with small integers taken modulo what there is to pick from.

const MUTATIONS = [
  'bitFlip',
  'truncate',
  'insertSpace',
  'deleteChar',
  'reorderMembers',
  'swapKeys',
  'duplicateMember',
  'escapeKey',
  'numberForm',
  'stringForm',
  'loneSurrogate',
  'wrap',
  'checksumInData',
  'checksumEdit',
  'eventEdit',
  'removeMember',
  'replaceToken',
] as const;

interface Mutation {
  kind: (typeof MUTATIONS)[number];
  a: number;
  b: number;
  c: number;
}

const mutationArb: fc.Arbitrary<Mutation> = fc.record({
  kind: fc.constantFrom(...MUTATIONS),
  a: fc.nat(),
  b: fc.nat(),
  c: fc.nat(),
});

/** A base body, what is done to it, and whether it is signed again afterwards (and how). */
export interface Case {
  base: string;
  mutations: Mutation[];
  resign: 'no' | 'jcs' | 'lexical';
  key: string;
}

export const caseArb: fc.Arbitrary<Case> = fc.record({
  base: baseArb,
  mutations: fc.array(mutationArb, { minLength: 1, maxLength: 3 }),
  resign: fc.constantFrom<Case['resign']>('no', 'no', 'no', 'jcs', 'lexical'),
  key: fc.constantFrom(...BUSINESS_IDS),
});

const SPACES = [' ', '\n', '\t', '\r', '\u00a0', '\f', '\v', '\u2028', '\ufeff'];
const TOKENS = [
  '0',
  '-0',
  '1e400',
  '-1E400',
  '9007199254740993',
  '1.0',
  '"x"',
  'null',
  'true',
  '[]',
  '{}',
  '""',
];

/** Every node of a tree, depth first, and the objects among them. */
function nodesOf(root: JsonNode): JsonNode[] {
  const out: JsonNode[] = [];
  const visit = (node: JsonNode) => {
    out.push(node);
    if (node.kind === 'array') node.items.forEach(visit);
    if (node.kind === 'object') for (const m of node.members) visit(m.value);
  };
  visit(root);
  return out;
}

const pick = <T>(list: readonly T[], n: number): T | undefined =>
  list.length === 0 ? undefined : list[n % list.length];

function objects(root: JsonNode) {
  return nodesOf(root).filter(
    (n): n is Extract<JsonNode, { kind: 'object' }> => n.kind === 'object' && n.members.length > 0,
  );
}

function tokens(root: JsonNode, test: (raw: string) => boolean) {
  return nodesOf(root).filter(
    (n): n is Extract<JsonNode, { kind: 'token' }> => n.kind === 'token' && test(n.raw),
  );
}

function envelopeMember(root: JsonNode, key: string): JsonMember | undefined {
  return root.kind === 'object' ? root.members.find((m) => m.key === key) : undefined;
}

/** Equivalent spellings of a number token (the same value once parsed). */
function numberForms(raw: string): string[] {
  if (/^-?\d+$/.test(raw)) {
    return [`${raw}.0`, `${raw}e0`, `${raw}E+00`, `${raw}0e-1`, raw === '0' ? '-0' : `${raw}.000`];
  }
  return [`${raw}0`.replace(/e0$/i, 'e00'), `${raw}e0`, `${raw}E-0`];
}

/** Equivalent spellings of a string token (the same value once parsed). */
function stringForms(raw: string): string[] {
  const value = JSON.parse(raw) as string;
  return [
    JSON.stringify(value),
    JSON.stringify(value).replace(/\//g, '\\/'),
    `"${[...value].map((ch) => (ch.length === 1 ? `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}` : ch)).join('')}"`,
    JSON.stringify(value).replace(
      /[\u0080-\uffff]/g,
      (c) => `\\u${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}`,
    ),
  ];
}

function mutateTree(root: JsonNode, m: Mutation): void {
  switch (m.kind) {
    case 'reorderMembers': {
      // Reversed, and rotated by one for odd b: the same members in another order.
      const obj = pick(objects(root), m.a);
      if (!obj) return;
      obj.members.reverse();
      if (m.b % 2 === 1) obj.members.push(obj.members.shift() as JsonMember);
      return;
    }
    case 'swapKeys': {
      const obj = pick(objects(root), m.a);
      if (!obj || obj.members.length < 2) return;
      const x = obj.members[m.b % obj.members.length] as JsonMember;
      const y = obj.members[m.c % obj.members.length] as JsonMember;
      [x.keyRaw, y.keyRaw, x.key, y.key] = [y.keyRaw, x.keyRaw, y.key, x.key];
      return;
    }
    case 'duplicateMember': {
      const obj = pick(objects(root), m.a);
      if (!obj) return;
      const source = obj.members[m.b % obj.members.length] as JsonMember;
      const value: JsonNode =
        m.c % 2 === 0 ? source.value : { kind: 'token', raw: pick(TOKENS, m.c) as string };
      obj.members.splice(m.c % (obj.members.length + 1), 0, { ...source, value });
      return;
    }
    case 'escapeKey': {
      // The same key, its first code unit written as a \u escape.
      const obj = pick(objects(root), m.a);
      const member = obj?.members[m.b % obj.members.length];
      if (!member || member.key.length === 0) return;
      const first = member.key.charCodeAt(0).toString(16).padStart(4, '0');
      member.keyRaw = `"\\u${first}${JSON.stringify(member.key.slice(1)).slice(1)}`;
      return;
    }
    case 'numberForm': {
      const token = pick(
        tokens(root, (raw) => /^-?\d/.test(raw)),
        m.a,
      );
      if (token) token.raw = pick(numberForms(token.raw), m.b) as string;
      return;
    }
    case 'stringForm': {
      const token = pick(
        tokens(root, (raw) => raw.startsWith('"')),
        m.a,
      );
      if (token) token.raw = pick(stringForms(token.raw), m.b) as string;
      return;
    }
    case 'loneSurrogate': {
      const token = pick(
        tokens(root, (raw) => raw.startsWith('"')),
        m.a,
      );
      if (token)
        token.raw = pick(
          ['"\\ud83d"', '"a\\udc00b"', '"\\udbff\\u0041"', `"\\ud800${token.raw.slice(1)}`],
          m.b,
        ) as string;
      return;
    }
    case 'wrap': {
      const all = nodesOf(root).slice(1);
      const target = pick(all, m.a);
      if (!target) return;
      const levels = 1 + (m.b % 70);
      const inner = { ...target } as JsonNode;
      let wrapped: JsonNode = inner;
      for (let k = 0; k < levels; k++) {
        wrapped =
          m.c % 2 === 0
            ? { kind: 'array', items: [wrapped] }
            : { kind: 'object', members: [{ keyRaw: '"w"', key: 'w', value: wrapped }] };
      }
      // Replace the target in place, so that its parent keeps it.
      for (const key of Object.keys(target)) delete (target as unknown as Record<string, unknown>)[key];
      Object.assign(target, wrapped);
      return;
    }
    case 'checksumInData': {
      const data = envelopeMember(root, 'data')?.value;
      if (data?.kind !== 'object') return;
      const raw = m.a % 2 === 0 ? JSON.stringify('0'.repeat(64)) : (pick(TOKENS, m.b) as string);
      data.members.splice(m.c % (data.members.length + 1), 0, {
        keyRaw: '"checksum"',
        key: 'checksum',
        value: { kind: 'token', raw },
      });
      return;
    }
    case 'checksumEdit': {
      const member = envelopeMember(root, 'checksum');
      if (member?.value.kind !== 'token') return;
      const hex = member.value.raw.startsWith('"') ? (JSON.parse(member.value.raw) as string) : '';
      const at = m.b % 64;
      const edits = [
        () => JSON.stringify(hex.toUpperCase()),
        () =>
          JSON.stringify(
            hex.slice(0, at) + ((parseInt(hex[at] ?? '0', 16) + 1) % 16).toString(16) + hex.slice(at + 1),
          ),
        () => JSON.stringify(hex.slice(0, 63)),
        () => JSON.stringify(`${hex}0`),
        () => JSON.stringify(`${hex.slice(0, at)}g${hex.slice(at + 1)}`),
        () => '12345',
        () => 'null',
        () => JSON.stringify(` ${hex}`),
      ];
      member.value.raw = (pick(edits, m.a) as () => string)();
      return;
    }
    case 'eventEdit': {
      const member = envelopeMember(root, 'event');
      if (!member) return;
      member.value = {
        kind: 'token',
        raw: pick(
          [
            '"payment.session.expired"',
            '""',
            '42',
            'null',
            '"Payment.session.created"',
            '"payment.session.created "',
          ],
          m.a,
        ) as string,
      };
      return;
    }
    case 'removeMember': {
      const obj = pick(objects(root), m.a);
      if (obj) obj.members.splice(m.b % obj.members.length, 1);
      return;
    }
    case 'replaceToken': {
      const token = pick(
        tokens(root, () => true),
        m.a,
      );
      if (token) token.raw = pick(TOKENS, m.b) as string;
      return;
    }
    default:
      return;
  }
}

function mutateBytes(body: Buffer, m: Mutation): Buffer {
  if (body.length === 0) return body;
  const at = m.a % body.length;
  switch (m.kind) {
    case 'bitFlip': {
      const out = Buffer.from(body);
      out[at] = (out[at] as number) ^ (1 << (m.b % 8));
      return out;
    }
    case 'truncate':
      return body.subarray(0, at);
    case 'insertSpace':
      return Buffer.concat([
        body.subarray(0, at),
        Buffer.from(pick(SPACES, m.b) as string),
        body.subarray(at),
      ]);
    case 'deleteChar':
      return Buffer.concat([body.subarray(0, at), body.subarray(at + 1)]);
    default:
      return body;
  }
}

/** The tree of a body the mutators can work on, or undefined (not UTF-8, not JSON). */
function treeOf(body: Buffer): JsonNode | undefined {
  try {
    const text = new TextDecoder('utf-8', { fatal: true }).decode(body);
    JSON.parse(text);
    return readTree(text, { strict: false });
  } catch {
    return undefined;
  }
}

/** Signs a mutated body again (over the JSON.parse view of data, or its lexical form), if it can. */
function resign(body: Buffer, mode: 'jcs' | 'lexical', key: string): Buffer {
  const root = treeOf(body);
  if (root === undefined) return body;
  const event = envelopeMember(root, 'event')?.value;
  const dataNode = envelopeMember(root, 'data')?.value;
  const checksum = envelopeMember(root, 'checksum');
  if (event?.kind !== 'token' || !event.raw.startsWith('"') || !dataNode || !checksum) return body;
  const name = JSON.parse(event.raw) as string;
  let signed: string | undefined;
  if (mode === 'lexical') signed = lexicalText(dataNode, true);
  else {
    const parsed = JSON.parse(new TextDecoder().decode(body)) as { data?: unknown };
    signed = jcsText(parsed.data);
  }
  if (signed === undefined) return body;
  checksum.value = { kind: 'token', raw: JSON.stringify(hmacHex(key, `${name}|${signed}`)) };
  return Buffer.from(writeTree(root));
}

/** The body a case stands for. */
export function bodyOf(c: Case): Buffer {
  let body: Buffer = Buffer.from(c.base);
  for (const m of c.mutations) {
    if (['bitFlip', 'truncate', 'insertSpace', 'deleteChar'].includes(m.kind)) {
      body = mutateBytes(body, m);
      continue;
    }
    const root = treeOf(body);
    if (root === undefined) continue;
    mutateTree(root, m);
    body = Buffer.from(writeTree(root, m.c % 5 === 0 ? ' ' : ''));
  }
  return c.resign === 'no' ? body : resign(body, c.resign, c.key);
}

// ---------------------------------------------------------------------------------------------
// The suite.

/** POSTs `body` to `url` over a kept-alive connection (node:http costs far less than fetch here). */
function post(url: string, body: Buffer, agent: Agent): Promise<{ status: number; text: string }> {
  const target = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: target.hostname,
        port: target.port,
        path: target.pathname,
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/json', 'content-length': body.length },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/**
 * Runs the verdict property against one adapter: one app for the whole run, a receiver with a
 * handler that does nothing, the mutations sent one after another over HTTP.
 */
export function describeVerdictProperty(name: string, start: StartPropertyApp): void {
  describe(`${name}: seeded mutations of signed bodies, judged by an independent reference`, () => {
    let receiver: Receiver;
    let app: PropertyApp;
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    beforeAll(async () => {
      receiver = createReceiver({
        businessIds: BUSINESS_IDS,
        allowAnyIp: true,
        recoveryIntervalMs: 0,
        logger: silentLogger,
      });
      receiver.onAny(() => {});
      receiver.onUnrecognized(() => {});
      app = await start(receiver);
    });
    afterAll(async () => {
      agent.destroy();
      await app?.close();
      await receiver?.close();
    });

    it(`answers ${PROPERTY_RUNS} mutated bodies as the reference does (seed ${PROPERTY_SEED})`, async () => {
      const seen: Record<string, number> = {};
      await fc.assert(
        fc.asyncProperty(caseArb, async (c) => {
          const body = bodyOf(c);
          const expected = referenceVerdict(body, BUSINESS_IDS);
          const res = await post(`${app.url}/webhooks`, body, agent);
          const answer = JSON.parse(res.text) as { received?: boolean; error?: { code: string } };
          const what = `seed ${PROPERTY_SEED}; body ${JSON.stringify(body.toString('latin1'))}; reference ${expected}; answer ${res.status} ${JSON.stringify(answer)}`;
          seen[expected] = (seen[expected] ?? 0) + 1;
          expect(res.status, `no 5xx: ${what}`).toBeLessThan(500);
          if (expected !== 'accepted')
            expect(res.status, `a 200 the reference refuses: ${what}`).not.toBe(200);
          expect(res.status, what).toBe(STATUS_OF[expected]);
          if (expected === 'accepted') expect(answer.received, what).toBe(true);
          else expect(answer.error?.code, what).toBe(expected);
        }),
        { seed: PROPERTY_SEED, numRuns: PROPERTY_RUNS },
      );
      // The mix is worth something only if every answer class occurs often.
      for (const verdict of ['accepted', 'malformed_payload', 'invalid_checksum'] as const) {
        expect(seen[verdict] ?? 0, `${verdict} cases: ${JSON.stringify(seen)}`).toBeGreaterThan(
          PROPERTY_RUNS / 20,
        );
      }
    }, 300_000);
  });
}
