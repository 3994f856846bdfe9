import { describe, expect, it } from 'vitest';
import { choice, decodeForm, integer, optional, readForm, text } from '../src/dashboard/form.js';
import { ApiError } from '../src/errors.js';
import { RotateBody } from '../src/http/signing-secrets.js';
import { EndpointStatus } from '../src/http/webhook-endpoints.js';

const overlap = RotateBody.anyOf[0].properties.overlap_seconds;

/** The error `decodeForm` throws for `body`. */
function decodeError(body: string): ApiError {
  try {
    decodeForm(body);
  } catch (error) {
    if (error instanceof ApiError) return error;
    throw error;
  }
  throw new Error(`decoded ${JSON.stringify(body)}`);
}

describe("the dashboard's form decoding", () => {
  it('decodes pluses, escapes and UTF-8, and keeps empty values', () => {
    expect(decodeForm('a=x+y%21&b=&c&d=%C3%A9')).toEqual({ a: 'x y!', b: '', c: '', d: 'é' });
    expect(decodeForm('')).toEqual({});
  });

  it('refuses a broken escape, bytes that are not UTF-8 and a field given twice, with 400 invalid_request', () => {
    for (const body of ['status=%ZZ', 'status=%', 'status=ena%2', 'st%ZZatus=enabled', 'status=%C3%28']) {
      const error = decodeError(body);
      expect([error.status, error.code], body).toEqual([400, 'invalid_request']);
      expect(error.message).toMatch(/encoding is broken/);
    }
    const twice = decodeError('status=enabled&status=disabled');
    expect([twice.status, twice.details]).toEqual([
      400,
      [{ field: 'status', message: 'is given more than once' }],
    ]);
  });
});

describe("the dashboard's form fields", () => {
  const rules = { status: choice(EndpointStatus), overlap_seconds: integer(overlap), note: optional(text()) };

  it("reads the values of each field's documented set, as the API's schema has them", () => {
    const read = readForm({ _csrf: 't', status: 'disabled', overlap_seconds: '3600' }, rules);
    expect(read).toEqual({ ok: true, values: { status: 'disabled', overlap_seconds: 3600 }, group: [] });
  });

  it('refuses a missing field, a choice not exactly offered, a number with anything but digits, and an unknown field', () => {
    for (const [fields, field, message] of [
      [{ overlap_seconds: '0' }, 'status', 'is required'],
      [{ status: 'Enabled', overlap_seconds: '0' }, 'status', 'must be one of enabled, disabled'],
      [{ status: ' enabled', overlap_seconds: '0' }, 'status', 'must be one of enabled, disabled'],
      [{ status: '%ZZ', overlap_seconds: '0' }, 'status', 'must be one of enabled, disabled'],
      [{ status: 'enabled', overlap_seconds: '3600abc' }, 'overlap_seconds', /whole number from 0 to \d+/],
      [{ status: 'enabled', overlap_seconds: '36e2' }, 'overlap_seconds', /whole number/],
      [{ status: 'enabled', overlap_seconds: '03600' }, 'overlap_seconds', /whole number/],
      [{ status: 'enabled', overlap_seconds: '' }, 'overlap_seconds', /whole number/],
      [{ status: 'enabled', overlap_seconds: '-1' }, 'overlap_seconds', /whole number/],
      [{ status: 'enabled', overlap_seconds: '99999999999' }, 'overlap_seconds', /whole number/],
      [{ status: 'enabled', overlap_seconds: '0', extra: 'x' }, 'extra', 'is not a field of this form'],
    ] as const) {
      const read = readForm(fields, rules);
      expect(read.ok, JSON.stringify(fields)).toBe(false);
      if (read.ok) continue;
      expect([read.error.status, read.error.code]).toEqual([422, 'validation_failed']);
      expect(read.error.details).toHaveLength(1);
      expect(read.error.details[0]?.field).toBe(field);
      expect(read.error.details[0]?.message).toMatch(message);
    }
  });

  it("returns a group's checked names, and refuses a checkbox with another value than on", () => {
    const read = readForm({ 'event:a': 'on', 'event:b': 'on' }, {}, { group: 'event:' });
    expect(read).toEqual({ ok: true, values: {}, group: ['a', 'b'] });
    const bad = readForm({ 'event:a': 'off' }, {}, { group: 'event:' });
    expect(bad.ok ? [] : bad.error.details).toEqual([
      { field: 'event:a', message: 'must be on when checked' },
    ]);
  });

  it('reads a form with no body as empty', () => {
    expect(readForm(undefined, {})).toEqual({ ok: true, values: {}, group: [] });
    expect(readForm(undefined, { status: choice(EndpointStatus) }).ok).toBe(false);
  });
});
