import fc from 'fast-check';
import {
  DummyDriver,
  Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  sql,
} from 'kysely';
import { describe, expect, it } from 'vitest';
import type { Schema } from '../src/db/schema.js';
import {
  CLI_DESTINATION_PREFIX,
  cliDestination,
  isListenerDestination,
  isWebhookUrl,
} from '../src/delivery/destination.js';

// Compiles statements only: what runs them against PGlite and PostgreSQL is listen.test.ts.
const compiler = new Kysely<Schema>({
  dialect: {
    createAdapter: () => new PostgresAdapter(),
    createDriver: () => new DummyDriver(),
    createIntrospector: (db) => new PostgresIntrospector(db),
    createQueryCompiler: () => new PostgresQueryCompiler(),
  },
});

/** What `url not like <pattern>` answers in PostgreSQL, for a pattern made of literals and a final `%`. */
function notLike(url: string, pattern: string): boolean {
  const literal = pattern.slice(0, -1);
  expect(pattern.endsWith('%')).toBe(true);
  // The prefix must hold no other wildcard (`%`, `_`) nor LIKE's escape (`\`), or LIKE reads it otherwise.
  expect(literal).not.toMatch(/[%_\\]/);
  return !url.startsWith(literal);
}

describe("a delivery's destination: the one owner of the `cli:` rule", () => {
  it("names a listener's destination `cli:<id>`, and tells it from webhook URLs", () => {
    expect(CLI_DESTINATION_PREFIX).toBe('cli:');
    expect(cliDestination('lst_1')).toBe('cli:lst_1');
    expect(isListenerDestination(cliDestination('lst_1'))).toBe(true);
    expect(isListenerDestination(cliDestination(''))).toBe(true);
    for (const url of [
      'https://example.com/webhooks',
      'https://cli:secret@example.com/hook', // credentials named cli
      'https://example.com/cli:1', // cli: further in
      'CLI:lst_1', // LIKE is case-sensitive, so is the rule
      'cli', // the prefix cut short
      ' cli:lst_1',
    ]) {
      expect(isListenerDestination(url), url).toBe(false);
    }
  });

  it('writes the SQL condition as the negation of the JavaScript one, on the column it is given', () => {
    const compiled = compiler
      .selectFrom('deliveries as d')
      .select('d.id')
      .where(isWebhookUrl('d.url'))
      .compile();
    expect(compiled.sql).toBe('select "d"."id" from "deliveries" as "d" where "d"."url" not like $1');
    const [pattern] = compiled.parameters as [string];
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string(),
          fc.string().map(cliDestination),
          fc.string().map((s) => `https://${s}`),
          fc.constantFrom('cli:', 'cli', 'cli_', 'cli%', 'Cli:x', 'cli:%', 'cli:_'),
        ),
        (url) => notLike(url, pattern) === !isListenerDestination(url),
      ),
    );
  });

  it("fits a statement written as SQL text too (an event's delivery status)", () => {
    const compiled = sql`select 1 where ${isWebhookUrl('deliveries.url')}`.compile(compiler);
    expect(compiled.sql).toBe('select 1 where "deliveries"."url" not like $1');
    expect(compiled.parameters).toEqual([`${CLI_DESTINATION_PREFIX}%`]);
  });
});
