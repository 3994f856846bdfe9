import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { lexicalEnvelope } from '../src/envelope.js';
import { isPayhookError, lexicalCanonicalJson, verifyChecksum } from '../src/index.js';
import { TextBytes } from '../src/lexical-text.js';
import { END, stringEnd } from '../src/lexical-tokens.js';
import { bodyWith, signText } from './fixtures/encode.js';

describe('lexicalCanonicalJson', () => {
  it.each([
    ['{ "b": 1.0, "a": "\\/path" }', '{"a":"\\/path","b":1.0}'],
    ['{"é":1,"\\u00e9x":2,"e":3}', '{"e":3,"é":1,"\\u00e9x":2}'],
    ['[ 1e2 , -0, {"z":[],"y":{}} ]', '[1e2,-0,{"y":{},"z":[]}]'],
    ['  "a\\"b"  ', '"a\\"b"'],
    ['{"a\\\\":1,"a":2}', '{"a":2,"a\\\\":1}'],
    ['{"a":"x\\\\","b":"\\"}"}', '{"a":"x\\\\","b":"\\"}"}'],
    ['{"b":"\\\\\\"","a":0}', '{"a":0,"b":"\\\\\\""}'],
    ['true', 'true'],
    ['{}', '{}'],
    ['{ }', '{}'],
    ['[ ]', '[]'],
    [
      '{"checksum":"kept at the top of a plain document"}',
      '{"checksum":"kept at the top of a plain document"}',
    ],
  ])('%s -> %s', (input, expected) => {
    expect(lexicalCanonicalJson(input)).toBe(expected);
  });

  it('sorts by UTF-16 code units of the decoded key, escaped or not', () => {
    expect(lexicalCanonicalJson('{"\\uffff":1,"\\ud83d\\ude00":2,"\u{1F600}x":3}')).toBe(
      '{"\\ud83d\\ude00":2,"\u{1F600}x":3,"\\uffff":1}',
    );
    // Unescaped, read as bytes: UTF-8 puts U+E000-U+FFFF before U+10000 and up; UTF-16 after them.
    expect(lexicalCanonicalJson('{"\ue000":1,"\u{1F600}":2,"\uffff":3,"é":4,"e":5}')).toBe(
      '{"e":5,"é":4,"\u{1F600}":2,"\ue000":1,"\uffff":3}',
    );
    expect(lexicalCanonicalJson('{"e":5,"é":4,"\u{1F600}":2,"\ue000":1,"\uffff":3}')).toBe(
      '{"e":5,"é":4,"\u{1F600}":2,"\ue000":1,"\uffff":3}',
    );
  });

  it('takes bytes', () => {
    expect(lexicalCanonicalJson(Buffer.from('{"b":1,"a":2}'))).toBe('{"a":2,"b":1}');
  });

  it.each([
    ['invalid JSON', '{"a":}'],
    ['trailing text', '{} x'],
    ['duplicate keys', '{"a":1,"b":2,"a":3}'],
    ['duplicate keys written differently', '{"\\u0061":1,"a":2}'],
    ['too deep', `${'['.repeat(65)}${']'.repeat(65)}`],
  ])('refuses %s with malformed_payload', (_name, input) => {
    try {
      lexicalCanonicalJson(input);
      expect.unreachable();
    } catch (error) {
      expect(isPayhookError(error) && error.code).toBe('malformed_payload');
    }
  });

  it('accepts 64 levels and takes a custom limit', () => {
    expect(lexicalCanonicalJson(`${'['.repeat(64)}${']'.repeat(64)}`)).toHaveLength(128);
    expect(() => lexicalCanonicalJson('[[[]]]', { maxDepth: 2 })).toThrow(/deeper than 2/);
  });

  it.each([
    ['arrays', (n: number) => `${'['.repeat(n)}${']'.repeat(n)}`],
    ['objects out of order', (n: number) => `${'{"b":1,"a":'.repeat(n)}0${'}'.repeat(n)}`],
  ])(
    'caps any maxDepth at 1,000 levels: deep %s are malformed_payload, never a RangeError',
    (_name, nest) => {
      expect(() => lexicalCanonicalJson(nest(1000), { maxDepth: Number.POSITIVE_INFINITY })).not.toThrow();
      for (const maxDepth of [5000, Number.POSITIVE_INFINITY, Number.NaN]) {
        for (const levels of [1001, 4000, 100_000]) {
          const attempts = [
            () => lexicalCanonicalJson(nest(levels), { maxDepth }),
            () => lexicalEnvelope(`{"event":"e","data":${nest(levels)},"checksum":"c"}`, maxDepth),
            () => lexicalEnvelope(`{ "data": ${nest(levels)} }`, maxDepth),
          ];
          for (const attempt of attempts) {
            try {
              attempt();
              expect.unreachable();
            } catch (error) {
              expect(error).not.toBeInstanceOf(RangeError);
              expect(isPayhookError(error) && error.code).toBe('malformed_payload');
            }
          }
        }
      }
    },
  );
});

/**
 * The lexical canonical form by the book, slow and plain: a recursive-descent reader that keeps
 * every token as written, sorts members by decoded key, and refuses duplicate keys. The real one
 * takes shortcuts (verbatim text when it is canonical already, a tape of token positions
 * otherwise); this is what they must agree with.
 */
function referenceLexical(text: string, omitTopKey?: string): string {
  JSON.parse(text); // validity, as the real one checks it
  let i = 0;
  const ws = () => {
    while (/[ \t\n\r]/.test(text[i] ?? '')) i++;
  };
  const stringToken = () => {
    const start = i++;
    while (text[i] !== '"') i += text[i] === '\\' ? 2 : 1;
    i++;
    return text.slice(start, i);
  };
  const value = (top = false): string => {
    ws();
    const c = text[i];
    let out: string;
    if (c === '{') {
      i++;
      const members: [string, string][] = [];
      ws();
      if (text[i] === '}') i++;
      else
        for (;;) {
          ws();
          const key = stringToken();
          ws();
          i++; // ':'
          members.push([JSON.parse(key) as string, `${key}:${value()}`]);
          ws();
          if (text[i++] === '}') break;
        }
      members.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
      for (let k = 1; k < members.length; k++) {
        if ((members[k] as [string, string])[0] === (members[k - 1] as [string, string])[0]) {
          throw new Error('duplicate');
        }
      }
      const kept = top && omitTopKey !== undefined ? members.filter((m) => m[0] !== omitTopKey) : members;
      out = `{${kept.map((m) => m[1]).join(',')}}`;
    } else if (c === '[') {
      i++;
      const items: string[] = [];
      ws();
      if (text[i] === ']') i++;
      else
        for (;;) {
          items.push(value());
          ws();
          if (text[i++] === ']') break;
        }
      out = `[${items.join(',')}]`;
    } else if (c === '"') {
      out = stringToken();
    } else {
      const start = i;
      while (i < text.length && !/[,\]} \t\n\r]/.test(text[i] as string)) i++;
      out = text.slice(start, i);
    }
    ws();
    return out;
  };
  return value(true);
}

/** JSON text of `value` spelled at random: whitespace, key order, escapes, number forms, duplicates. */
function randomSpelling(value: unknown, rand: () => number, duplicates = true): string {
  const ws = () => (rand() < 0.7 ? '' : ([' ', '\n', '\t', '\r\n  '][Math.floor(rand() * 4)] as string));
  const str = (s: string) => {
    if (rand() < 0.6) return JSON.stringify(s);
    let out = '"';
    // Code points, and the escapes JSON.stringify wrote kept whole.
    for (const ch of JSON.stringify(s)
      .slice(1, -1)
      .match(/\\u[0-9a-fA-F]{4}|\\.|[\s\S]/gu) ?? []) {
      const r = rand();
      if (ch === '/' && r < 0.5) out += '\\/';
      else if (ch.length === 1 && ch !== '\\' && r < 0.2)
        out += `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`;
      else if (ch.length === 2 && ch[0] !== '\\' && r < 0.3)
        out += `\\u${ch.charCodeAt(0).toString(16)}\\u${ch.charCodeAt(1).toString(16).toUpperCase()}`;
      else out += ch;
    }
    return `${out}"`;
  };
  const num = (n: number) => {
    const plain = JSON.stringify(n);
    const r = rand();
    if (plain === '0' && r < 0.3) return '-0';
    const integer = /^-?[0-9]+$/.test(plain);
    if (integer && r < 0.2) return `${plain}.0`;
    if (integer && r < 0.3) return `${plain}e0`;
    if (r < 0.35) return plain.replace('e+', 'E+');
    return plain;
  };
  const go = (v: unknown): string => {
    let out: string;
    if (typeof v === 'string') out = str(v);
    else if (typeof v === 'number') out = num(v);
    else if (v === null || typeof v !== 'object') out = JSON.stringify(v);
    else if (Array.isArray(v)) out = `[${v.map(go).join(',') || ws()}]`;
    else {
      const keys = Object.keys(v);
      if (rand() < 0.4) keys.sort();
      else if (rand() < 0.5) keys.reverse();
      const members = keys.map((k) => `${ws()}${str(k)}${ws()}:${go((v as Record<string, unknown>)[k])}`);
      if (duplicates && keys.length > 0 && rand() < 0.05) {
        const k = keys[Math.floor(rand() * keys.length)] as string;
        members.splice(Math.floor(rand() * members.length), 0, `${str(k)}:${go(null)}`);
      }
      out = `{${members.join(',') || ws()}}`;
    }
    return `${ws()}${out}${ws()}`;
  };
  return go(value);
}

function seeded(seed: number): () => number {
  let state = seed >>> 0 || 1;
  return () => {
    state = (state * 1103515245 + 12345) >>> 0;
    return state / 2 ** 32;
  };
}

/** The outcome of a canonicalization: its text, or how it failed. */
function outcome(fn: () => string): string {
  try {
    return fn();
  } catch (error) {
    return isPayhookError(error) || (error as Error).message === 'duplicate' ? 'refused' : 'threw';
  }
}

describe('lexicalCanonicalJson against a reference implementation', () => {
  const key = fc.oneof(
    fc.string(),
    fc.constantFrom('a', 'b', '', ' ', '!', 'é', '\u{1F600}', '\uffff', '/', 'checksum', '10', '9'),
    // Keys that share their first two code units (the sort's prefix) and differ after them.
    fc.constantFrom('ab', 'abc', 'ab\u0000', 'a', 'a\u0000', 'abd', '\u{1F600}a', '\u{1F600}'),
    // Past the units read one by one: their closing quote is found by a search.
    fc.string({ minLength: 13, maxLength: 40 }),
  );
  const tree = fc.letrec((tie) => ({
    node: fc.oneof(
      { depthSize: 'small' },
      fc.oneof(fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.maxSafeInteger()),
      fc.string({ unit: 'grapheme' }),
      fc.string({ minLength: 13, maxLength: 60 }),
      fc.constantFrom(true, false, null, 0, -1, 1e21, 2 ** 53 + 2, 0.5),
      fc.array(tie('node'), { maxLength: 4 }),
      fc.dictionary(key, tie('node'), { maxKeys: 6 }),
      // Objects larger than the insertion sort takes.
      fc.dictionary(key, fc.integer(), { minKeys: 33, maxKeys: 60 }),
    ),
  }));

  it('gives the same text, or refuses the same bodies, on any spelling of any value', () => {
    fc.assert(
      fc.property(tree.node, fc.integer(), (value, seed) => {
        const text = randomSpelling(value, seeded(seed));
        const expected = outcome(() => referenceLexical(text));
        expect(
          outcome(() => lexicalCanonicalJson(text)),
          text,
        ).toBe(expected);
        expect(outcome(() => lexicalCanonicalJson(Buffer.from(text)))).toBe(expected);
      }),
      { numRuns: 3000 },
    );
  });

  it('agrees with it on the data of a webhook body (its checksum key left out)', () => {
    fc.assert(
      fc.property(fc.dictionary(key, tree.node, { maxKeys: 6 }), fc.integer(), (data, seed) => {
        const dataText = randomSpelling(data, seeded(seed));
        const expected = outcome(() => referenceLexical(dataText, 'checksum'));
        const checksum = expected === 'refused' ? 'a'.repeat(64) : signText('x', expected, 'k');
        const result = verifyChecksum(
          { rawBody: bodyWith('x', dataText, checksum) },
          { businessIds: ['k'], canonicalization: 'lexical' },
        );
        if (expected === 'refused')
          expect(!result.ok && result.error.code, dataText).toBe('malformed_payload');
        else expect(result.ok, dataText).toBe(true);
      }),
      { numRuns: 1000 },
    );
  });

  it('reads a body in the sender layout as its general loop reads the same body laid out otherwise', () => {
    fc.assert(
      fc.property(tree.node, fc.integer(), fc.string(), (value, seed, event) => {
        const laidOut = envelope(event, randomSpelling(value, seeded(seed)));
        expect(readEnvelope(laidOut), laidOut).toBe(readEnvelope(` ${laidOut}`));
      }),
      { numRuns: 2000 },
    );
  });

  it('agrees with it on large bodies, one after another', () => {
    const rand = seeded(7);
    for (const n of [10, 3000, 200, 20_000]) {
      const items = Array.from({ length: n }, (_, k) => ({
        sku: `SKU-${k}`,
        name: `Item ${k} \u00e9/\u{1F600}`,
        price: k * 1.5,
        tags: ['a', { z: k, y: [k, null] }],
      }));
      const text = randomSpelling({ items, total: n }, rand, false);
      expect(lexicalCanonicalJson(text)).toBe(referenceLexical(text));
      const duplicated = randomSpelling({ items, total: n }, rand);
      expect(outcome(() => lexicalCanonicalJson(duplicated))).toBe(
        outcome(() => referenceLexical(duplicated)),
      );
    }
  });
});

const CHECKSUM = 'a'.repeat(64);

/** A body in the sender's layout (what `JSON.stringify` writes) with `data` spliced in as text. */
function envelope(event: string, dataText: string): string {
  return bodyWith(event, dataText, CHECKSUM);
}

/** What lexicalEnvelope makes of a body: the text of data, or the refusal's message. */
function readEnvelope(text: string): string | undefined {
  try {
    return lexicalEnvelope(text).data;
  } catch (error) {
    return `refused: ${(error as Error).message}`;
  }
}

describe('lexicalEnvelope', () => {
  // Each body is also read with a space before it, which no sender-layout match accepts, so
  // that the general loop reads it: both readings must agree.
  it.each([
    ['the sender layout, data canonical', envelope('x', '{"a":1,"b":[2]}'), '{"a":1,"b":[2]}'],
    ['the sender layout, data out of order', envelope('x', '{"b":1,"a":2}'), '{"a":2,"b":1}'],
    ['data with its own checksum key', envelope('x', '{"checksum":"1","z":2}'), '{"z":2}'],
    ['a string as data, after a space', envelope('x', ' "y"'), '"y"'],
    ['a number as data, after a newline', envelope('x', '\n12'), '12'],
    ['data followed by a space', envelope('x', '{"a":1} '), '{"a":1}'],
    ['an escaped event name', envelope('a"b\u00e9', '{"a":1}'), '{"a":1}'],
    ['a member after checksum', `{"event":"x","data":{"a":1},"checksum":"${CHECKSUM}","extra":1}`, '{"a":1}'],
    [
      'a member between data and checksum',
      `{"event":"x","data":[1],"more":{},"checksum":"${CHECKSUM}"}`,
      '[1]',
    ],
    ['an escaped key', `{"\u0065vent":"x","data":{"a":1},"checksum":"${CHECKSUM}"}`, '{"a":1}'],
    [
      'a second data member',
      `{"event":"x","data":{"a":1},"data":{"a":2},"checksum":"${CHECKSUM}"}`,
      /"data" twice/,
    ],
    [
      'a second event member',
      `{"event":"x","data":{},"checksum":"${CHECKSUM}","event":"y"}`,
      /"event" twice/,
    ],
    ['duplicate keys inside data', envelope('x', '{"a":1,"b":{"c":1,"c":2}}'), /"c" twice/],
    [
      'data 63 levels deep',
      envelope('x', `${'['.repeat(63)}${']'.repeat(63)}`),
      `${'['.repeat(63)}${']'.repeat(63)}`,
    ],
    ['data 64 levels deep', envelope('x', `${'['.repeat(64)}${']'.repeat(64)}`), /deeper than 64/],
  ])('reads %s as its general loop does', (_name, body, expected) => {
    JSON.parse(body); // lexicalEnvelope reads only what JSON.parse accepted
    const read = readEnvelope(body);
    expect(read).toBe(readEnvelope(` ${body}`));
    if (typeof expected === 'string') expect(read).toBe(expected);
    else expect(read).toMatch(expected);
  });
});

describe('TextBytes.stringEnd', () => {
  // It reads a word (4 bytes) at a time from the first aligned byte: every string token, at every
  // offset from a word's start, its quote or backslash at every position, must end where a read
  // byte by byte ends it.
  it('ends every string token where a byte-by-byte read does, at any alignment', () => {
    const bodies = ['', 'a', 'ab', 'abc', 'abcd', 'abcdefghijk', 'abcdefghijklmnopqrstuvwxyz0123456789'];
    const specials = ['\\"', '\\\\', '\\u0022', 'é', '\u{1F600}', '\u0080'];
    for (let pad = 0; pad < 8; pad++) {
      for (const body of bodies) {
        for (let at = 0; at <= body.length; at++) {
          for (const special of ['', ...specials]) {
            const token = `"${body.slice(0, at)}${special}${body.slice(at)}"`;
            const text = `${' '.repeat(pad)}[${token},"x\\"y"]`;
            JSON.parse(text);
            const bytes = new TextBytes(text);
            const start = Buffer.byteLength(' '.repeat(pad)) + 1;
            const expected = stringEnd(bytes.u, start);
            expect(bytes.stringEnd(start), text).toBe(expected);
            expect(expected & END, text).toBe(start + Buffer.byteLength(token));
          }
        }
      }
    }
  });

  it('reads a text past the kept buffer in one of its own, and the next text in the kept one', () => {
    // Over a million code units, some past ASCII: more than the kept buffer holds.
    const big = `{"z":"${'é'.repeat(400_000)}","a":[${Array.from({ length: 150_000 }, (_, k) => k).join(',')}]}`;
    expect(big.length).toBeGreaterThan(1 << 20);
    const expected = JSON.stringify({ a: JSON.parse(big).a, z: JSON.parse(big).z });
    expect(lexicalCanonicalJson(big)).toBe(expected);
    expect(lexicalCanonicalJson('{"b":"\\"x","a":1}')).toBe('{"a":1,"b":"\\"x"}');
    expect(lexicalCanonicalJson(big)).toBe(expected);
  });
});
