import { describe, expect, it } from 'vitest';
import { isPayhookError, lexicalCanonicalJson } from '../src/index.js';

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
});
