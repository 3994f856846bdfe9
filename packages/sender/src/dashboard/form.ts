import type { TSchema } from 'typebox';
import { Compile } from 'typebox/compile';
import { ApiError, type FieldError } from '../errors.js';

/*
 * The dashboard's forms, read strictly (docs/decisions.md, "Forms read strictly, against the API's
 * schemas"): a value outside a field's documented set is refused with a 4xx page, never read as
 * the nearest choice.
 * Each choice and number is checked against the API's own schema for the field, so a form and
 * the route it calls accept the same values.
 */

/** A form as the pages post it: each field once, decoded. */
export type Form = Record<string, string | undefined>;

/** The field every form carries and {@link readForm} leaves to the session check. */
const CSRF_FIELD = '_csrf';

/**
 * Decodes an `application/x-www-form-urlencoded` body strictly: malformed percent-encoding
 * (`%ZZ`, a lone `%`, bytes that are not UTF-8) and a field given twice are a 400
 * `invalid_request`, where `URLSearchParams` would keep the text as it is or keep the last one.
 *
 * @example
 * ```ts
 * decodeForm('status=enabled&note=a+b%21'); // { status: 'enabled', note: 'a b!' }
 * decodeForm('status=%ZZ'); // throws ApiError invalid_request (400)
 * ```
 */
export function decodeForm(body: string): Form {
  const form: Form = {};
  for (const pair of body.split('&')) {
    if (pair === '') continue;
    const at = pair.indexOf('=');
    const name = decodeComponent(at < 0 ? pair : pair.slice(0, at), 'a field name');
    const value = at < 0 ? '' : decodeComponent(pair.slice(at + 1), `the field ${name}`);
    if (Object.hasOwn(form, name)) {
      throw new ApiError('invalid_request', `The form gives the field ${name} more than once.`, {
        details: [{ field: name, message: 'is given more than once' }],
      });
    }
    form[name] = value;
  }
  return form;
}

function decodeComponent(text: string, what: string): string {
  try {
    return decodeURIComponent(text.replaceAll('+', ' '));
  } catch {
    throw new ApiError(
      'invalid_request',
      `The form's encoding is broken in ${what}: a % must start an escape of two hex digits of UTF-8.`,
    );
  }
}

/** How one field is read: its value, or what is wrong with it. */
export interface FieldRule<T, Required extends boolean = boolean> {
  /** True when the form must carry the field (the page's own form always sends it). */
  required: Required;
  read(value: string): { value: T } | { problem: string };
}

/** A form's fields, each with its rule. */
export type FormRules = Record<string, FieldRule<unknown>>;
/** What {@link readForm} reads of a form with these rules: each field's value, `undefined` for an absent optional one. */
export type FormValues<R extends FormRules> = {
  [K in keyof R]: R[K] extends FieldRule<infer T, infer Required>
    ? Required extends true
      ? T
      : T | undefined
    : never;
};

/** The same rule, for a field the form may leave out. */
export const optional = <T>(rule: FieldRule<T, true>): FieldRule<T, false> => ({ ...rule, required: false });

/** The literal values of a schema that is a union of literals (or one literal). */
function literalsOf(schema: TSchema): string[] {
  const options = 'anyOf' in schema ? (schema.anyOf as TSchema[]) : [schema];
  return options.map((option) => (option as { const?: unknown }).const).filter((v) => typeof v === 'string');
}

/**
 * A field whose value is one of the literals of `schema`, the API's own schema for the field,
 * exactly (case and spaces count).
 */
export function choice(schema: TSchema): FieldRule<string, true> {
  const values = literalsOf(schema);
  const valid = Compile(schema);
  return {
    required: true,
    read: (value) => (valid.Check(value) ? { value } : { problem: `must be one of ${values.join(', ')}` }),
  };
}

const INTEGER = /^-?(0|[1-9][0-9]*)$/;

/**
 * A field whose value is a whole number in decimal digits (no sign but `-`, no spaces, no
 * fraction, no trailing text), within the bounds of `schema`, the API's schema for the field,
 * when one is given (without one, the API's route checks its range).
 */
export function integer(schema?: TSchema): FieldRule<number, true> {
  const valid = schema ? Compile(schema) : undefined;
  const { minimum, maximum } = (schema ?? {}) as { minimum?: number; maximum?: number };
  const range = minimum !== undefined && maximum !== undefined ? ` from ${minimum} to ${maximum}` : '';
  return {
    required: true,
    read: (value) => {
      const n = Number(value);
      if (!INTEGER.test(value) || !Number.isSafeInteger(n) || (valid && !valid.Check(n)))
        return { problem: `must be a whole number${range}, in digits only` };
      return { value: n };
    },
  };
}

/** A free text field (a URL, a date, a description, a key): the API's route checks what it says. */
export const text = (): FieldRule<string, true> => ({ required: true, read: (value) => ({ value }) });

/** A checkbox: present with the browser's value `on`, or absent. */
export const checkbox: FieldRule<true, false> = {
  required: false,
  read: (value) => (value === 'on' ? { value: true } : { problem: 'must be on when checked' }),
};

/**
 * A form read against its fields' rules: each value of its documented set, each required field
 * present, no field the form does not have. `group` names a prefix of checkboxes (`event:`)
 * whose checked names it returns. Anything else is a 422 `validation_failed` naming each field;
 * the caller then changes nothing.
 *
 * @example
 * ```ts
 * const read = readForm(request.body, { status: choice(EndpointStatus) });
 * if (!read.ok) return apiRefusal(reply, read.error.status, { error: read.error.toJSON().error });
 * read.values.status; // 'enabled' | 'disabled', as the API's schema has them
 * ```
 */
export function readForm<R extends FormRules>(
  form: Form | undefined,
  rules: R,
  options: { group?: string } = {},
): { ok: true; values: FormValues<R>; group: string[] } | { ok: false; error: ApiError } {
  const details: FieldError[] = [];
  const values: Record<string, unknown> = {};
  const group: string[] = [];
  for (const [name, rule] of Object.entries(rules)) {
    const value = form?.[name];
    if (value === undefined) {
      if (rule.required) details.push({ field: name, message: 'is required' });
      continue;
    }
    const read = rule.read(value);
    if ('problem' in read) details.push({ field: name, message: read.problem });
    else values[name] = read.value;
  }
  for (const [name, value] of Object.entries(form ?? {})) {
    if (name === CSRF_FIELD || Object.hasOwn(rules, name)) continue;
    if (options.group && name.startsWith(options.group)) {
      const read = checkbox.read(value ?? '');
      if ('problem' in read) details.push({ field: name, message: read.problem });
      else group.push(name.slice(options.group.length));
      continue;
    }
    details.push({ field: name, message: 'is not a field of this form' });
  }
  if (details.length > 0) {
    return {
      ok: false,
      error: new ApiError(
        'validation_failed',
        'The form has values it does not offer: nothing was changed.',
        {
          details,
        },
      ),
    };
  }
  return { ok: true, values: values as FormValues<R>, group };
}
