// @module-tag postgres
// @module-tag pglite
import { randomUUID } from 'node:crypto';
import { CompiledQuery, sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { PREPARE } from '../src/db/database.js';
import { writeEventStatement } from '../src/delivery/delivery-state.js';
import { openTestDatabase, testStorages } from './fixtures/storage.js';

// The fan-out's filter check with 10,000 endpoints in the table: the event's statement reads only
// its own business's endpoints, through the endpoints' index, never the table. This is why the
// sender-api benchmark's rows with 10,000 endpoints cost what the rows with one do.

describe.each(testStorages())('the fan-out at 10,000 endpoints on %s', { timeout: 120_000 }, (storage) => {
  it("reads only the business's endpoints, by index, and writes exactly the deliveries its filters take", async () => {
    const { database, cleanup } = await openTestDatabase(storage, 'fanout');
    try {
      const { db } = database;
      await sql`insert into webhook_endpoints (business_id, mode, url)
        select 'other-' || (g / 20), 'test', 'https://o' || g || '.example/' from generate_series(1, 9980) g`.execute(
        db,
      );
      await sql`insert into webhook_endpoints (business_id, mode, url, enabled_events)
        select 'biz-fan', 'test', 'https://f' || g || '.example/',
               case when g = 1 then '["payment.session.created"]'::jsonb else '["payment.session.failed"]'::jsonb end
        from generate_series(1, 20) g`.execute(db);
      await sql`analyze webhook_endpoints`.execute(db);
      const id = randomUUID();
      const statement = writeEventStatement(db, {
        id,
        businessId: 'biz-fan',
        mode: 'test',
        type: 'payment.session.created',
        paymentId: null as unknown as string,
        payload: '{}',
      });
      const explained = await db.executeQuery(
        CompiledQuery.raw(`explain ${statement.sql.replace(PREPARE, '')}`, [...statement.parameters]),
      );
      const plan = explained.rows.map((r) => Object.values(r as object)[0]).join('\n');
      expect(plan).toMatch(
        /Index Scan using webhook_endpoints_page on webhook_endpoints|Bitmap Index Scan on webhook_endpoints_page/,
      );
      expect(plan).not.toMatch(/Seq Scan on webhook_endpoints/);
      await db.executeQuery(statement);
      const made = await db.selectFrom('deliveries').select('url').where('event_id', '=', id).execute();
      expect(made).toEqual([{ url: 'https://f1.example/' }]);
    } finally {
      await cleanup();
    }
  });
});
